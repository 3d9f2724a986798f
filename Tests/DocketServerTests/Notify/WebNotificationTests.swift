import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

/// The web UI's "Enable notifications" calls (`/app/push/…`): a signed-in page's session and CSRF token, JSON bodies,
/// one's own subscriptions only.
@Suite("Web UI push subscriptions")
struct WebNotificationTests {
    /// Posts JSON as the page's script does: the session cookie, and the page's token in `X-CSRF-Token` (unless given).
    static func call(
        _ browser: WebBrowser, _ uri: String, _ body: String, csrf: String? = nil, contentType: String = "application/json"
    ) async throws -> TestResponse {
        var headers = browser.cookieHeader
        headers[.contentType] = contentType
        let token = csrf ?? browser.csrf
        if !token.isEmpty { headers[HTTPField.Name("X-CSRF-Token")!] = token }
        return try await browser.client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: body))
    }

    static func endpoints(_ client: any TestClientProtocol, user: String) async throws -> [String] {
        try await client.get(
            "/api/now/table/sys_push_subscription?sysparm_query=user=\(DemoData.userID(user))&sysparm_fields=endpoint", .admin
        ).results.map { $0.string("endpoint") }.sorted()
    }

    @Test("enable and disable: the page's subscription is registered for its user and removed by its endpoint; again is the same one")
    func enableDisable() async throws {
        try await TestApp.withRouter(configure: { $0.pushAllowInsecureEndpoints = true }) { client in
            var john = WebBrowser(client)
            try await john.signIn()
            try await john.get("/app/notifications")
            #expect(!john.csrf.isEmpty)
            let key = try await john.get("/app/push/vapid")
            #expect(key.status == .ok)
            #expect(try await client.get("/api/docket/push/vapid").result.string("public_key").isEmpty == false)
            let body = NotificationAPITests.subscription("http://127.0.0.1:9/push/web-1", name: "Chromium")
            let created = try await Self.call(john, "/app/push/subscriptions", body)
            #expect(created.status == .created)
            let again = try await Self.call(john, "/app/push/subscriptions", body)
            #expect(again.status == .ok)
            #expect(try created.json.string("sys_id") == again.json.string("sys_id"))
            #expect(try await Self.endpoints(client, user: "john.doe") == ["http://127.0.0.1:9/push/web-1"])
            // Beth cannot remove john's subscription by naming its endpoint: nothing of hers has it.
            var beth = WebBrowser(client)
            try await beth.signIn("beth.anglin", "password")
            try await beth.get("/app/notifications")
            let foreign = try await Self.call(beth, "/app/push/subscriptions/remove", #"{"endpoint":"http://127.0.0.1:9/push/web-1"}"#)
            #expect(foreign.status == .ok)
            #expect(try foreign.json["removed"] == .integer(0))
            #expect(try await Self.endpoints(client, user: "john.doe").count == 1)
            let removed = try await Self.call(john, "/app/push/subscriptions/remove", #"{"endpoint":"http://127.0.0.1:9/push/web-1"}"#)
            #expect(try removed.json["removed"] == .integer(1))
            #expect(try await Self.endpoints(client, user: "john.doe").isEmpty)
        }
    }

    @Test("refused: no, a forged or another session's CSRF token (403), Basic credentials instead of a session, signed out, not JSON, bad JSON; nothing stored")
    func refusals() async throws {
        try await TestApp.withRouter(configure: { $0.pushAllowInsecureEndpoints = true }) { client in
            var john = WebBrowser(client)
            try await john.signIn()
            try await john.get("/app/notifications")
            var beth = WebBrowser(client)
            try await beth.signIn("beth.anglin", "password")
            try await beth.get("/app/notifications")
            let body = NotificationAPITests.subscription("http://127.0.0.1:9/push/forged")
            for path in ["/app/push/subscriptions", "/app/push/subscriptions/remove"] {
                for token in ["", "forged", beth.csrf] {
                    var headers = john.cookieHeader
                    headers[.contentType] = "application/json"
                    if !token.isEmpty { headers[HTTPField.Name("X-CSRF-Token")!] = token }
                    let response = try await client.execute(uri: path, method: .post, headers: headers, body: ByteBuffer(string: body))
                    #expect(response.status == .forbidden, "\(path) with token '\(token)'")
                }
                // Basic credentials are not a page's session: the web UI does not take them.
                var basic = HTTPFields.john
                basic[.contentType] = "application/json"
                basic[HTTPField.Name("X-CSRF-Token")!] = john.csrf
                let withBasic = try await client.execute(uri: path, method: .post, headers: basic, body: ByteBuffer(string: body))
                #expect(withBasic.status == .unauthorized, "\(path) with Basic: \(withBasic.status)")
                let signedOut = try await client.execute(
                    uri: path, method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: body)
                )
                #expect(signedOut.status == .unauthorized, "\(signedOut.status)")
            }
            #expect(try await Self.call(john, "/app/push/subscriptions", body, contentType: "text/plain").status == .unsupportedMediaType)
            #expect(try await Self.call(john, "/app/push/subscriptions", "{not json").status == .badRequest)
            #expect(try await Self.call(john, "/app/push/subscriptions", #"{"endpoint":"http://127.0.0.1:9/x"}"#).status == .badRequest)
            #expect(try await Self.call(john, "/app/push/subscriptions", String(repeating: "x", count: 20_000)).status == .contentTooLarge)
            #expect(try await Self.call(john, "/app/push/subscriptions/remove", #"{"endpoint":""}"#).status == .badRequest)
            #expect(try await Self.call(john, "/app/push/subscriptions/remove", "[]").status == .badRequest)
            #expect(try await Self.endpoints(client, user: "john.doe").isEmpty)
        }
    }
}
