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
}
