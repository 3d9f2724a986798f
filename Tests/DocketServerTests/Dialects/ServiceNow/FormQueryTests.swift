import Testing

@testable import DocketServer

@Suite("Query-string decoding")
struct FormQueryTests {
    @Test("plus is a space, percent escapes decode, malformed escapes stay literal")
    func decoding() {
        #expect(FormQuery.decode("a+b%20c") == "a b c")
        #expect(FormQuery.decode("element_id%3Dabc%5EORDERBYDESCsys_created_on") == "element_id=abc^ORDERBYDESCsys_created_on")
        #expect(FormQuery.decode("caf%C3%A9") == "café")
        #expect(FormQuery.decode("100%") == "100%")
        #expect(FormQuery.decode("%zz%4") == "%zz%4")
        #expect(FormQuery.decode("%2B") == "+")
    }

    @Test("pairs keep their order and empty values")
    func pairs() {
        let pairs = FormQuery.parse("a=1&b=&c&d=x%3Dy")
        #expect(pairs.map(\.0) == ["a", "b", "c", "d"])
        #expect(pairs.map(\.1) == ["1", "", "", "x=y"])
    }
}
