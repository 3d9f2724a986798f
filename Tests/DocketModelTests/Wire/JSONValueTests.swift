import DocketModel
import Foundation
import Testing

@Suite("JSON values")
struct JSONValueTests {
    @Test("serialisation keeps member order and escapes control characters")
    func serialize() {
        let value = JSONValue.object([
            "b": .string("line\n\"quoted\"\u{1}"), "a": .array([.number(3), .number(1.5), .bool(true), .null])])
        #expect(String(decoding: value.serialized(), as: UTF8.self) == #"{"b":"line\n\"quoted\"\u0001","a":[3,1.5,true,null]}"#)
    }

    @Test("parsing distinguishes booleans from numbers")
    func parse() throws {
        let value = try JSONValue.parse(Data(#"{"flag":true,"n":1,"s":"x","z":null,"list":[false]}"#.utf8))
        #expect(value["flag"] == .bool(true))
        #expect(value["n"] == .number(1))
        #expect(value["s"] == .string("x"))
        #expect(value["z"] == .null)
        #expect(value["list"] == .array([.bool(false)]))
    }

    @Test("invalid JSON throws")
    func invalid() {
        #expect(throws: (any Error).self) { try JSONValue.parse(Data("{".utf8)) }
    }
}

@Suite("JSON parser")
struct JSONParserTests {
    @Test("object members keep document order")
    func order() throws {
        let value = try JSONValue.parse(Data(#"{"z":1,"a":{"y":2,"b":3}}"#.utf8))
        #expect(value.objectValue?.map(\.0) == ["z", "a"])
        #expect(value["a"]?.objectValue?.map(\.0) == ["y", "b"])
    }

    @Test("escapes, unicode and numbers decode")
    func escapes() throws {
        let value = try JSONValue.parse(Data(#"["a\"b\\c\n", "\u00e9\ud83d\ude00", -1.5e2, 0, "é"]"#.utf8))
        #expect(value == .array([.string("a\"b\\c\n"), .string("é😀"), .number(-150), .number(0), .string("é")]))
    }

    @Test(
        "malformed documents are rejected",
        arguments: ["", "{", "[1,]", "{\"a\" 1}", "01x", "\"unterminated", "[1] 2", "{'a':1}", "tru", "\"\u{1}\"", "1.", "-"]
    )
    func malformed(text: String) {
        #expect(throws: (any Error).self) { try JSONValue.parse(Data(text.utf8)) }
    }

    @Test("deep nesting is refused instead of overflowing the stack")
    func depth() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: (any Error).self) { try JSONValue.parse(Data(deep.utf8)) }
    }
}

@Suite("JSON parser strictness")
struct JSONStrictnessTests {
    @Test("leading zeros are rejected", arguments: ["01", "-01", "[00]", "{\"a\":012}", "1e400"])
    func leadingZeros(text: String) {
        #expect(throws: (any Error).self) { try JSONValue.parse(Data(text.utf8)) }
    }

    @Test("whole numbers stay exact, including beyond 2^53")
    func exactIntegers() throws {
        let value = try JSONValue.parse(Data("[9007199254740993,-9223372036854775808,0,-0,1.5,1e3,18446744073709551616]".utf8))
        #expect(value.arrayValue?[0] == .integer(9_007_199_254_740_993))
        #expect(value.arrayValue?[1] == .integer(Int.min))
        #expect(value.arrayValue?[4] == .number(1.5))
        #expect(value.arrayValue?[5].intValue == 1000)
        #expect(value.arrayValue?[6] == .number(18_446_744_073_709_551_616))
        #expect(String(decoding: value.serialized(), as: UTF8.self).hasPrefix("[9007199254740993,-9223372036854775808,0,0,1.5,"))
    }

    @Test("member order is kept and lookups find the last of repeated names")
    func orderAndLookup() throws {
        let value = try JSONValue.parse(Data(#"{"z":1,"a":2,"m":3,"a":4}"#.utf8))
        #expect(value.objectValue?.keys.elements == ["z", "a", "m"])
        #expect(value["a"] == .integer(4))
    }
}
