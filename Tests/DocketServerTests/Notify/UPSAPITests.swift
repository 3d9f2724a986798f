import DocketModel
import DocketTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import DocketServer

/// AeroGear UnifiedPush's device registry and sender API through the router, with the DataSync showcase's demo
/// variants: what its SDKs send, verbatim, and what must be refused.
@Suite("UnifiedPush Server API (AeroGear)")
struct UPSAPITests {
    static func basic(_ user: String, _ secret: String) -> HTTPFields {
        [.authorization: "Basic " + Data("\(user):\(secret)".utf8).base64EncodedString(), .contentType: "application/json"]
    }

    static let ios = DemoNotifications.variants[0]
    static let android = DemoNotifications.variants[1]
    static let token = String(repeating: "a1b2", count: 16)

    /// The body AeroGear's iOS SDK sends (`categories` a string when the app gave none).
    static func installation(_ token: String, alias: String = "john.doe") -> ByteBuffer {
        ByteBuffer(string: #"{"deviceToken":"\#(token)","deviceType":"iPhone","operatingSystem":"iOS","osVersion":"17.4","alias":"\#(alias)","categories":""}"#)
    }

    static func rows(_ client: any TestClientProtocol, _ query: String) async throws -> [JSONValue] {
        try await client.get("/api/now/table/sys_push_subscription?sysparm_query=\(query)&sysparm_fields=sys_id,user,kind,token,alias,device_type&sysparm_exclude_reference_link=true", .admin).results
    }

    @Test("the showcase's iOS registration, verbatim: stored with its alias and bound to nobody; again is the same installation; x-ag-old-token replaces; DELETE removes")
    func register() async throws {
        try await TestApp.withRouter { client in
            let path = "/rest/registry/device"
            let first = try await client.execute(uri: path, method: .post, headers: Self.basic(Self.ios.1, Self.ios.2), body: Self.installation(Self.token))
            #expect(first.status == .ok)
            let id = try first.json.string("id")
            #expect(try first.json.string("deviceToken") == Self.token && first.json["categories"] == .array([]))
            let stored = try await Self.rows(client, "token=\(Self.token)")
            // The alias names an app or a group for the sender API, never a person: variant credentials prove nobody.
            #expect(stored.count == 1 && stored.first?.string("user") == "" && stored.first?.string("kind") == "apns")
            #expect(stored.first?.string("alias") == "john.doe")
            let again = try await client.execute(uri: path, method: .post, headers: Self.basic(Self.ios.1, Self.ios.2), body: Self.installation(Self.token))
            #expect(try again.json.string("id") == id)
            let newToken = String(repeating: "c3d4", count: 16)
            var headers = Self.basic(Self.ios.1, Self.ios.2)
            headers[HTTPField.Name("x-ag-old-token")!] = Self.token
            let replaced = try await client.execute(uri: path, method: .post, headers: headers, body: Self.installation(newToken))
            #expect(replaced.status == .ok)
            #expect(try await Self.rows(client, "token=\(Self.token)").isEmpty)
            #expect(try await Self.rows(client, "token=\(newToken)").count == 1)
            let removed = try await client.execute(uri: "\(path)/\(newToken)", method: .delete, headers: Self.basic(Self.ios.1, Self.ios.2), body: nil)
            #expect(removed.status == .noContent)
            let gone = try await client.execute(uri: "\(path)/\(newToken)", method: .delete, headers: Self.basic(Self.ios.1, Self.ios.2), body: nil)
            #expect(gone.status == .notFound)
            let metric = try await client.execute(uri: "\(path)/pushMessage/abc", method: .put, headers: Self.basic(Self.ios.1, Self.ios.2), body: nil)
            #expect(metric.status == .ok)
        }
    }

    @Test("a registration that proves its user (bearer token in X-Docket-Authorization, or the session cookie) binds the device to that user; credentials that do not hold are 401, not nobody")
    func provenUser() async throws {
        try await TestApp.withRouter { client in
            let path = "/rest/registry/device"
            let token = try await client.passwordGrant("beth.anglin").string("access_token")
            SuiteLog.credential(token)
            var headers = Self.basic(Self.ios.1, Self.ios.2)
            headers[UPSAPI.userAuthorization] = "Bearer \(token)"
            // The alias says admin; the proof says beth: beth it is.
            let proven = try await client.execute(uri: path, method: .post, headers: headers, body: Self.installation(Self.token, alias: "admin"))
            #expect(proven.status == .ok)
            #expect(try await Self.rows(client, "token=\(Self.token)").first?.string("user") == DemoData.userID("beth.anglin"))
            // Registering again without proof unbinds it: a device is a person's only while its registration says so.
            _ = try await client.execute(uri: path, method: .post, headers: Self.basic(Self.ios.1, Self.ios.2), body: Self.installation(Self.token))
            #expect(try await Self.rows(client, "token=\(Self.token)").first?.string("user") == "")
            for bad in ["Bearer not-a-token", "Basic am9objpwYXNzd29yZA==", "Bearer ", "Bearer a.b.c"] {
                headers[UPSAPI.userAuthorization] = bad
                let refused = try await client.execute(uri: path, method: .post, headers: headers, body: Self.installation(Self.token))
                #expect(refused.status == .unauthorized, "\(bad)")
            }
            // A session (the JSESSIONID a Basic login sets) proves its user too.
            let login = try await client.execute(uri: "/api/now/table/sys_user?sysparm_limit=1", method: .get, headers: .john, body: nil)
            let cookie = try #require(login.headers[.setCookie]?.split(separator: ";").first.map(String.init))
            var withSession = Self.basic(Self.ios.1, Self.ios.2)
            withSession[.cookie] = cookie
            #expect(try await client.execute(uri: path, method: .post, headers: withSession, body: Self.installation(Self.token)).status == .ok)
            #expect(try await Self.rows(client, "token=\(Self.token)").first?.string("user") == DemoData.userID("john.doe"))
            withSession[.cookie] = "JSESSIONID=ended-or-never-was"
            #expect(try await client.execute(uri: path, method: .post, headers: withSession, body: Self.installation(Self.token)).status == .unauthorized)
        }
    }

    @Test("one device registered by ten requests at once (an app retrying on a bad network) is one installation, and every answer names it")
    func concurrentRegistrations() async throws {
        try await TestApp.withRouter { client in
            let token = String(repeating: "e5f6", count: 16)
            let ids = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        let answer = try await client.execute(
                            uri: "/rest/registry/device", method: .post, headers: Self.basic(Self.ios.1, Self.ios.2), body: Self.installation(token)
                        )
                        #expect(answer.status == .ok)
                        return try answer.json.string("id")
                    }
                }
                return try await group.reduce(into: Set<String>()) { $0.insert($1) }
            }
            let stored = try await Self.rows(client, "token=\(token)")
            #expect(stored.count == 1)
            #expect(ids.count == 1 && ids.first == stored.first?.string("sys_id"))
        }
    }

    @Test("refusals: no or wrong credentials are 401 with UPS's challenge; tokens a variant's platform does not take, and bodies that are not installations, are 400")
    func refusals() async throws {
        try await TestApp.withRouter { client in
            let path = "/rest/registry/device"
            for headers in [Self.basic(Self.ios.1, "wrong"), Self.basic("nope", Self.ios.2), [.contentType: "application/json"] as HTTPFields] {
                let refused = try await client.execute(uri: path, method: .post, headers: headers, body: Self.installation(Self.token))
                #expect(refused.status == .unauthorized)
                #expect(refused.headers[.wwwAuthenticate] == #"Basic realm="AeroGear UnifiedPush Server""#)
            }
            for (headers, body) in [
                (Self.basic(Self.ios.1, Self.ios.2), Self.installation("xyz")), (Self.basic(Self.ios.1, Self.ios.2), Self.installation(String(repeating: "a", count: 63))),
                (Self.basic(Self.android.1, Self.android.2), Self.installation("short")), (Self.basic(Self.ios.1, Self.ios.2), ByteBuffer(string: "{}")),
                (Self.basic(Self.ios.1, Self.ios.2), ByteBuffer(string: "[1]")), (Self.basic(Self.ios.1, Self.ios.2), ByteBuffer(string: "{")),
            ] {
                let refused = try await client.execute(uri: path, method: .post, headers: headers, body: body)
                #expect(refused.status == .badRequest, "\(String(buffer: body).prefix(60))")
            }
            let preflight = try await client.execute(uri: path, method: .options, headers: [:], body: nil)
            #expect(preflight.status == .noContent && preflight.headers[.accessControlAllowMethods]?.contains("POST") == true)
        }
    }

    @Test("the sender API: the master secret, then every matching device of the application gets the message (202); criteria narrow it")
    func sender() async throws {
        try await TestApp.withRouter { client in
            // John's app registers his device with his token: the sender's messages to it are his, in his inbox.
            let token = try await client.passwordGrant().string("access_token")
            SuiteLog.credential(token)
            var proven = Self.basic(Self.ios.1, Self.ios.2)
            proven[UPSAPI.userAuthorization] = "Bearer \(token)"
            _ = try await client.execute(uri: "/rest/registry/device", method: .post, headers: proven, body: Self.installation(Self.token))
            let send = "/rest/sender"
            let body = ByteBuffer(string: #"{"message":{"alert":"New task: Buy milk","sound":"default","apns":{"title":"Tasks"}},"criteria":{"alias":["john.doe"]}}"#)
            let wrong = try await client.execute(uri: send, method: .post, headers: Self.basic(DemoNotifications.pushApplicationKey, "nope"), body: body)
            #expect(wrong.status == .unauthorized)
            let sent = try await client.execute(
                uri: send, method: .post, headers: Self.basic(DemoNotifications.pushApplicationKey, DemoNotifications.pushMasterSecret), body: body
            )
            #expect(sent.status == .accepted)
            let inbox = try await client.get("/api/docket/notifications")
            #expect(try inbox.results.first?.string("subject") == "Tasks" && inbox.results.first?.string("message") == "New task: Buy milk")
            let narrowed = try await client.execute(
                uri: send, method: .post, headers: Self.basic(DemoNotifications.pushApplicationKey, DemoNotifications.pushMasterSecret),
                body: ByteBuffer(string: #"{"message":{"alert":"For Beth"},"criteria":{"alias":["beth.anglin"]}}"#)
            )
            #expect(narrowed.status == .accepted)
            #expect(try await client.get("/api/docket/notifications").results.count == 1)
            let empty = try await client.execute(
                uri: send, method: .post, headers: Self.basic(DemoNotifications.pushApplicationKey, DemoNotifications.pushMasterSecret),
                body: ByteBuffer(string: #"{"message":{}}"#)
            )
            #expect(empty.status == .badRequest)
        }
    }

    @Test("mobile-services.json lists the showcase's push variants (variantId and variantSecret), and the web variant's appServerKey")
    func mobileServices() async throws {
        try await TestApp.withRouter { client in
            let document = try await client.get("/mobile-services.json", [:]).json
            let push = try #require(document["services"]?.arrayValue?.first { $0.string("type") == "push" })
            #expect(push["config"]?["ios"]?.string("variantId") == Self.ios.1 && push["config"]?["ios"]?.string("variantSecret") == Self.ios.2)
            #expect(push["config"]?["android"]?.string("variantId") == Self.android.1)
            let key = try await client.get("/api/docket/push/vapid").result.string("public_key")
            #expect(push["config"]?["web_push"]?.string("appServerKey") == key)
        }
    }
}
