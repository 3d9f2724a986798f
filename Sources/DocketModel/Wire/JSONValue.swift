import Foundation
import OrderedCollections

/// A JSON value with object keys kept in document (or insertion) order, so that responses are stable and
/// readable, and integers kept exact.
///
/// ```swift
/// let body: JSONValue = .object(["result": .array([.string("a")]), "count": .integer(1)])
/// String(decoding: body.serialized(), as: UTF8.self) // {"result":["a"],"count":1}
/// ```
public enum JSONValue: Sendable, Equatable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A whole number written without fraction or exponent that fits 64 bits, kept exact
    /// (`9007199254740993` stays itself).
    case integer(Int)
    /// Any other number: a fraction, an exponent, or a whole number beyond 64 bits.
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object, members in order; looking up a member is a hash lookup. A document that repeats a name keeps
    /// the last value at the first position.
    case object(OrderedDictionary<String, JSONValue>)

    /// Structural equality: object members compared in order; `.integer(1)` equals `.number(1.0)`.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.integer(let a), .integer(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.integer(let a), .number(let b)), (.number(let b), .integer(let a)): return Double(exactly: a) == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)): return a == b
        default: return false
        }
    }

    /// An object from name-value pairs built at run time; a repeated name keeps the last value.
    ///
    /// ```swift
    /// JSONValue(members: [("a", .integer(1)), ("b", .null)])
    /// ```
    public init(members: some Sequence<(String, JSONValue)>) {
        var object: OrderedDictionary<String, JSONValue> = [:]
        for (name, value) in members { object[name] = value }
        self = .object(object)
    }

    /// The value of a key when this is an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members[key]
    }

    /// The number as a `Double` when this is a number of either kind.
    public var doubleValue: Double? {
        switch self {
        case .integer(let value): return Double(value)
        case .number(let value): return value
        default: return nil
        }
    }

    /// The number as an `Int` when this is a whole number that fits (`2`, `2.0`, `2e3`); nil otherwise.
    public var intValue: Int? {
        switch self {
        case .integer(let value): return value
        case .number(let value): return Int(exactly: value)
        default: return nil
        }
    }

    /// The string when this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The elements when this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The members when this is an object.
    public var objectValue: OrderedDictionary<String, JSONValue>? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// Compact UTF-8 JSON.
    public func serialized() -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        write(to: &output)
        return output
    }

    /// Appends compact UTF-8 JSON to a buffer.
    public func write(to output: inout [UInt8]) {
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let value): output.append(contentsOf: (value ? "true" : "false").utf8)
        case .integer(let value): output.append(contentsOf: String(value).utf8)
        case .number(let value):
            if value.isFinite, value == value.rounded(), abs(value) < 1e15 {
                output.append(contentsOf: String(Int64(value)).utf8)
            } else if value.isFinite {
                output.append(contentsOf: String(value).utf8)
            } else {
                output.append(contentsOf: "null".utf8)
            }
        case .string(let value): Self.writeString(value, to: &output)
        case .array(let values):
            output.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                value.write(to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, (key, value)) in members.elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.writeString(key, to: &output)
                output.append(UInt8(ascii: ":"))
                value.write(to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func writeString(_ string: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        // Most strings need no escaping: copy them in one go.
        let copied = string.utf8.withContiguousStorageIfAvailable { buffer -> Bool in
            for byte in buffer where byte < 0x20 || byte == 0x22 || byte == 0x5c { return false }
            output.append(contentsOf: buffer)
            return true
        }
        if copied == true {
            output.append(UInt8(ascii: "\""))
            return
        }
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [0x5c, 0x22])
            case UInt8(ascii: "\\"): output.append(contentsOf: [0x5c, 0x5c])
            case 0x0a: output.append(contentsOf: [0x5c, UInt8(ascii: "n")])
            case 0x0d: output.append(contentsOf: [0x5c, UInt8(ascii: "r")])
            case 0x09: output.append(contentsOf: [0x5c, UInt8(ascii: "t")])
            case 0..<0x20:
                output.append(contentsOf: "\\u00".utf8)
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0xf)])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}

extension JSONValue: Codable {
    /// Parses JSON text strictly, keeping object members in document order.
    public static func parse(_ data: Data) throws -> JSONValue {
        try JSONParser.parse(Array(data))
    }

    /// Parses JSON bytes strictly, keeping object members in document order.
    public static func parse(_ bytes: [UInt8]) throws -> JSONValue {
        try JSONParser.parse(bytes)
    }

    /// Decodes any JSON value. A `Decoder` does not report the order of an object's members, so they come in
    /// the decoder's key order; ``parse(_:)-(Data)`` keeps document order.
    public init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var values: [JSONValue] = []
            while !array.isAtEnd { values.append(try array.decode(JSONValue.self)) }
            self = .array(values)
            return
        }
        if let object = try? decoder.container(keyedBy: AnyKey.self) {
            var members: OrderedDictionary<String, JSONValue> = [:]
            for key in object.allKeys { members[key.stringValue] = try object.decode(JSONValue.self, forKey: key) }
            self = .object(members)
            return
        }
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else {
            self = .string(try container.decode(String.self))
        }
    }

    /// Encodes the value as JSON.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .integer(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .number(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .string(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .array(let values):
            var container = encoder.unkeyedContainer()
            for value in values { try container.encode(value) }
        case .object(let members):
            var container = encoder.container(keyedBy: AnyKey.self)
            for (key, value) in members { try container.encode(value, forKey: AnyKey(stringValue: key)) }
        }
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { return nil }
    }
}

// Literals, for JSON written out in code (documents such as the OpenAPI description).
extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .integer(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self.init(members: elements) }
}
