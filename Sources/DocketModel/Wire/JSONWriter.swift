/// Writes compact JSON straight into bytes, for responses too hot to build a ``JSONValue`` tree first.
///
/// ```swift
/// var writer = JSONWriter()
/// writer.beginObject()
/// writer.key("result"); writer.string("ok")
/// writer.endObject()
/// writer.bytes // {"result":"ok"}
/// ```
public struct JSONWriter: Sendable {
    /// The JSON written so far.
    public private(set) var bytes: [UInt8] = []
    /// Whether the open container at each depth needs a comma before its next element: one bit per depth for
    /// the first 64 (every response's nesting), an array beyond.
    private var commaBits: UInt64 = 0
    private var depth = 0
    private var deeper: [Bool] = []

    /// Creates a writer, optionally reserving room.
    public init(capacity: Int = 1024) { bytes.reserveCapacity(capacity) }

    /// Opens an object: members follow as ``key(_:)`` and a value.
    public mutating func beginObject() { open(UInt8(ascii: "{")) }
    /// Closes the innermost object.
    public mutating func endObject() { close(UInt8(ascii: "}")) }
    /// Opens an array.
    public mutating func beginArray() { open(UInt8(ascii: "[")) }
    /// Closes the innermost array.
    public mutating func endArray() { close(UInt8(ascii: "]")) }

    /// Writes an object member's name; the value follows.
    public mutating func key(_ name: String) {
        separate()
        JSONValue.writeString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        // The value after a key takes no comma of its own.
        setNeedsComma(false)
    }

    /// Writes a member name prepared with ``encodedKey(_:)`` (saves escaping the same name again and again).
    public mutating func key(encoded: [UInt8]) {
        separate()
        // Through a buffer pointer: appending the array itself would retain and release it, and prepared keys are
        // shared by every thread rendering at once (their reference counts would bounce between processors).
        encoded.withUnsafeBufferPointer { bytes.append(contentsOf: $0) }
        setNeedsComma(false)
    }

    /// A member name as ``key(encoded:)`` takes it: the quoted, escaped name and a colon.
    public static func encodedKey(_ name: String) -> [UInt8] {
        var bytes: [UInt8] = []
        JSONValue.writeString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        return bytes
    }

    /// Writes a string value.
    public mutating func string(_ value: String) {
        separate()
        JSONValue.writeString(value, to: &bytes)
    }

    /// Writes a string value made of `prefix` (already escaped, without quotes) and `value`.
    public mutating func string(prefix: [UInt8], _ value: String) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        prefix.withUnsafeBufferPointer { bytes.append(contentsOf: $0) }
        // The value written quoted, then its opening quote taken out (its closing one ends the string).
        let opening = bytes.count
        JSONValue.writeString(value, to: &bytes)
        bytes.remove(at: opening)
    }

    /// Writes any JSON value.
    public mutating func value(_ value: JSONValue) {
        separate()
        value.write(to: &bytes)
    }

    private mutating func separate() {
        guard depth > 0 else { return }
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        setNeedsComma(true)
    }

    /// The innermost open container's flag.
    private var needsComma: Bool {
        depth <= 64 ? commaBits & (1 << UInt64(depth - 1)) != 0 : deeper[depth - 65]
    }

    private mutating func setNeedsComma(_ value: Bool) {
        guard depth > 0 else { return }
        if depth <= 64 {
            let bit: UInt64 = 1 << UInt64(depth - 1)
            commaBits = value ? commaBits | bit : commaBits & ~bit
        } else {
            deeper[depth - 65] = value
        }
    }

    private mutating func open(_ byte: UInt8) {
        separate()
        bytes.append(byte)
        depth += 1
        if depth > 64 { deeper.append(false) } else { setNeedsComma(false) }
    }

    private mutating func close(_ byte: UInt8) {
        if depth > 64 { deeper.removeLast() }
        depth -= 1
        bytes.append(byte)
    }
}
