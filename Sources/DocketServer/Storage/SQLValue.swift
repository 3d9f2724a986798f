import NIOCore

/// A value read from or written to a column, independent of the SQL driver.
enum SQLValue: Sendable, Equatable {
    case null
    case text(String)
    case integer(Int)
    case real(Double)

    /// The value as something SQLKit can bind; nil for NULL (callers write `NULL` literally).
    var bindable: (any Encodable & Sendable)? {
        switch self {
        case .null: return nil
        case .text(let value): return value
        case .integer(let value): return value
        case .real(let value): return value
        }
    }

    var fragment: SQLFragment {
        if let value = bindable { return .bind(value) }
        return "NULL"
    }

    /// The value as text (numbers in their decimal form); nil for NULL.
    var text: String? {
        switch self {
        case .text(let value): return value
        case .integer(let value): return String(value)
        case .real(let value): return String(value)
        case .null: return nil
        }
    }

    /// The value as an integer when it is one (or text of one); nil otherwise.
    var intValue: Int? {
        switch self {
        case .integer(let value): return value
        case .real(let value): return Int(exactly: value.rounded(.towardZero))
        case .text(let value): return Int(value)
        case .null: return nil
        }
    }
}

/// Binary content to bind (attachment bytes). Drivers bind it as a blob; it is never encoded as text.
struct SQLBlob: Encodable, Sendable {
    /// The bytes, bound as they are (no copy until the driver's own).
    var buffer: ByteBuffer

    init(_ buffer: ByteBuffer) { self.buffer = buffer }
    init(bytes: [UInt8]) { buffer = ByteBuffer(bytes: bytes) }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Array(buffer.readableBytesView))
    }
}
