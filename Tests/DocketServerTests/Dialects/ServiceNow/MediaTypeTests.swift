import Testing

@testable import DocketServer

/// The Table API's request bodies: JSON by their content type, read without Foundation (every POST asks).
@Suite("Table API: media types")
struct MediaTypeTests {
    @Test("a media type is read without its parameters and the spaces and tabs around it", arguments: [
        ("application/json", true), ("application/json; charset=utf-8", true), (" \tapplication/json\t ;q=1", true),
        ("text/json", true), ("application/vnd.api+json", true), ("text/plain", false), (";application/json", false),
        ("", false), ("application/jsonx", false), ("application/json x", false),
    ])
    func mediaTypes(_ type: String, json: Bool) {
        #expect(ServiceNowMiddleware.isJSON(type) == json)
    }
}
