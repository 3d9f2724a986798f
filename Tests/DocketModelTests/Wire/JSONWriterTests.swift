import DocketModel
import Testing

@Suite("JSONWriter")
struct JSONWriterTests {
    /// Writes `value` through the writer's calls, as a renderer does.
    static func write(_ value: JSONValue, to writer: inout JSONWriter) {
        switch value {
        case .object(let members):
            writer.beginObject()
            for (name, member) in members {
                writer.key(name)
                write(member, to: &writer)
            }
            writer.endObject()
        case .array(let elements):
            writer.beginArray()
            for element in elements { write(element, to: &writer) }
            writer.endArray()
        case .string(let text):
            writer.string(text)
        default:
            writer.value(value)
        }
    }

    @Test("commas and nesting come out as JSONValue writes them, at every depth (past 64 levels too: 80), for empty and full containers")
    func nesting() throws {
        var deep: JSONValue = .array([.string("bottom"), .object([:]), .array([])])
        for level in 0..<80 {
            deep = level.isMultiple(of: 2)
                ? .object(["a": deep, "b": .integer(level), "c": .array([.null, .bool(true)])])
                : .array([.string("x\(level)"), deep, .object([:])])
        }
        for value in [deep, .object([:]), .array([]), .object(["k": .array([.array([]), .array([.string("\"q\"\n")])])])] {
            var writer = JSONWriter()
            Self.write(value, to: &writer)
            #expect(writer.bytes == value.serialized())
            #expect(try JSONValue.parse(writer.bytes) == value)
        }
    }

    @Test("a prepared key and a string after an escaped prefix")
    func preparedParts() throws {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key(encoded: JSONWriter.encodedKey("link"))
        writer.string(prefix: Array(#"https://h/api/now/table/sys_user/"#.utf8), "ab\"c")
        writer.key(encoded: JSONWriter.encodedKey("value"))
        writer.string("v")
        writer.endObject()
        #expect(try JSONValue.parse(writer.bytes) == .object(["link": .string("https://h/api/now/table/sys_user/ab\"c"), "value": .string("v")]))
    }
}
