import DocketModel
import Foundation
import Hummingbird

/// `POST /api/now/tinyurl` with `{"url": "<a URL too long to send>"}`: keeps the URL's query in `sys_tiny_url` and
/// answers `{"result": "<path>?sysparm_tiny=<token>"}`; a Table API request with only `sysparm_tiny=<token>` is then
/// answered as the kept query (``TinyURLs/expand(_:store:)``). Kept in storage, so every instance expands it.
struct TinyURLController {
    typealias Context = DocketRequestContext

    let store: RecordStore

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.post(use: create)
        return routes
    }

    @Sendable func create(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let body = try await RequestBody.json(from: request, context: context)
        guard let text = body["url"]?.stringValue, !text.isEmpty, let url = URLComponents(string: text) else {
            throw ServiceNowError.badRequest("Invalid URL", detail: "Give the URL to shorten as url")
        }
        let query = url.percentEncodedQuery ?? ""
        guard query.utf8.count <= TinyURLs.maxQueryBytes else {
            throw ServiceNowError.badRequest("URL too long", detail: "A query of at most \(TinyURLs.maxQueryBytes) bytes")
        }
        let token = SysID.generate()
        // Kept as the system: a tiny URL is no record of the caller's, and expanding it grants nothing (the request it
        // stands for is checked as its caller's).
        try await store.insert(
            into: "sys_tiny_url", values: ["tiny_url": token, "data": query, "user": caller.userID], caller: .system
        )
        let path = url.percentEncodedPath
        // Only Table API lists are answered by their token.
        guard path.hasPrefix("/api/now/table/") || path.hasPrefix("/api/now/v1/table/") || path.hasPrefix("/api/now/v2/table/"),
            !path.contains("//")
        else {
            throw ServiceNowError.badRequest("Invalid URL", detail: "Only Table API URLs (/api/now/table/…) can be shortened")
        }
        return Response.json(.object(["result": .string("\(path)?sysparm_tiny=\(token)")]), status: .ok)
    }
}

enum TinyURLs {
    static let maxQueryBytes = 60_000

    /// The query a request stands for: the kept one when its query is `sysparm_tiny=<token>` (404 when the token is
    /// unknown), else its own.
    static func expand(_ query: String?, store: RecordStore) async throws -> String? {
        let parameters = FormQuery.parse(query)
        guard let token = parameters.first(where: { $0.0 == "sysparm_tiny" })?.1 else { return query }
        // A token is 32 hexadecimal digits, matched as a whole (never read as a query of its own).
        guard token.utf8.count == 32, token.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else {
            throw ServiceNowError(.notFound, "No Record found", detail: "No tiny URL \(token.prefix(64))")
        }
        let page = try await store.list(
            RecordQuery(
                table: "sys_tiny_url", query: EncodedQuery(all: [QueryCondition("tiny_url", .equals, token)]), fields: ["data"],
                limit: 1, count: false
            ),
            caller: .system
        )
        guard let data = page.records.first?.values["data"] else {
            throw ServiceNowError(.notFound, "No Record found", detail: "No tiny URL \(token.prefix(64))")
        }
        return data
    }
}
