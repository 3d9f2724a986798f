import Crypto
import DocketModel
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

@testable import DocketServer

/// `/api/docket/push/…` and `/api/docket/notifications` through the router: what they accept, whose devices and
/// messages each caller sees, and what they refuse.
@Suite("Notification API")
struct NotificationAPITests {
    static let p256dh = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let auth = "BTBZMqHH6r4Tts7J_aSIgg"

    static func subscription(_ endpoint: String, kind: String? = nil, name: String = "Laptop") -> String {
        let kindMember = kind.map { #""kind":"\#($0)","# } ?? ""
        return #"{\#(kindMember)"name":"\#(name)","endpoint":"\#(endpoint)","keys":{"p256dh":"\#(p256dh)","auth":"\#(auth)"}}"#
    }

    @Test("the VAPID public key: an uncompressed P-256 key, the same on every call, for signed-in callers only")
    func vapidKey() async throws {
        try await TestApp.withRouter { client in
            let first = try await client.get("/api/docket/push/vapid")
            #expect(first.status == .ok)
            let key = try first.result.string("public_key")
            #expect(key.count == 87 && Base64URL.decode(key)?.first == 4)
            #expect(try await client.get("/api/docket/push/vapid", .beth).result.string("public_key") == key)
            #expect(try await client.get("/api/docket/push/vapid", [:]).status == .unauthorized)
        }
    }

    /// A throw-away APNs auth key (a P-256 key in PKCS#8 PEM, as Apple gives it).
    static func apnsKey() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("AuthKey-\(UUID().uuidString).p8").path
        try P256.Signing.PrivateKey().pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("registering devices: Web Push and APNs; the same endpoint again is the same device; a UnifiedPush endpoint that does not answer as one, and bad bodies, are 400")
    func subscribe() async throws {
        let key = try Self.apnsKey()
        defer { try? FileManager.default.removeItem(atPath: key) }
        try await TestApp.withRouter(configure: {
            $0.pushAllowInsecureEndpoints = true
            $0.apns = APNsConfiguration(keyFile: key, keyID: "ABCDEFGHIJ", teamID: "TEAM123456", topic: "com.docket.app")
        }) { client in
            let path = "/api/docket/push/subscriptions"
            let created = try await client.send(.post, path, json: Self.subscription("http://127.0.0.1:9/push/1"))
            #expect(created.status == .created)
            let id = try created.result.string("sys_id")
            #expect(SysID.isValid(id))
            #expect(try created.result.string("kind") == "webpush" && created.result.string("name") == "Laptop")
            let again = try await client.send(.post, path, json: Self.subscription("http://127.0.0.1:9/push/1", name: "Work laptop"))
            #expect(again.status == .ok)
            #expect(try again.result.string("sys_id") == id && again.result.string("name") == "Work laptop")
            let unified = try await client.send(.post, path, json: Self.subscription("http://127.0.0.1:9/up/2", kind: "unifiedpush"))
            #expect(unified.status == .badRequest)
            #expect(unified.errorMessage == "The endpoint is not a UnifiedPush endpoint")
            let apple = try await client.send(.post, path, json: #"{"kind":"apns","token":"\#(String(repeating: "ab", count: 32))"}"#)
            #expect(apple.status == .created)
            let mine = try await client.get("/api/now/table/sys_push_subscription?sysparm_fields=sys_id,user")
            #expect(try mine.results.count == 2)
            // The same endpoint registered by beth is now hers: john's goes.
            let taken = try await client.send(.post, path, json: Self.subscription("http://127.0.0.1:9/push/1"), headers: .beth)
            #expect(taken.status == .created)
            #expect(try await client.get("/api/now/table/sys_push_subscription?sysparm_fields=sys_id").results.count == 1)
            #expect(try await client.get("/api/now/table/sys_push_subscription", .beth).results.count == 1)
            for (body, what) in [
                ("{", "not JSON"), ("[]", "not an object"), (#"{"keys":{}}"#, "no endpoint"),
                (#"{"endpoint":"http://127.0.0.1:9/x","keys":{"p256dh":"AAAA","auth":"\#(Self.auth)"}}"#, "a bad key"),
                (#"{"endpoint":"http://127.0.0.1:9/x"}"#, "no keys"), (#"{"kind":"apns","token":"xyz"}"#, "a bad token"),
                (#"{"kind":"carrier-pigeon"}"#, "an unknown kind"), (Self.subscription("ftp://127.0.0.1/x"), "not http(s)"),
                (Self.subscription("http://127.0.0.1:9/" + String(repeating: "a", count: 1000)), "too long"),
            ] {
                let refused = try await client.send(.post, path, json: body)
                #expect(refused.status == .badRequest, "\(what): \(refused.status)")
            }
            #expect(try await client.send(.post, path, json: Self.subscription("http://127.0.0.1:9/z"), headers: [:]).status == .unauthorized)
        }
    }

    @Test("the same device registered by ten requests at once is one subscription, and every answer names it")
    func concurrentRegistration() async throws {
        try await TestApp.withRouter(configure: { $0.pushAllowInsecureEndpoints = true }) { client in
            let answers = try await withThrowingTaskGroup(of: (HTTPResponse.Status, String).self) { group in
                for index in 0..<10 {
                    group.addTask {
                        let answer = try await client.send(
                            .post, "/api/docket/push/subscriptions", json: Self.subscription("http://127.0.0.1:9/same", name: "Try \(index)")
                        )
                        return (answer.status, try answer.result.string("sys_id"))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.0 == .created || $0.0 == .ok })
            #expect(Set(answers.map(\.1)).count == 1)
            #expect(try await client.get("/api/now/table/sys_push_subscription?sysparm_fields=sys_id").results.count == 1)
        }
    }

    @Test("without --push-allow-insecure-endpoints, http:// and private addresses are refused; without an APNs key, APNs tokens are")
    func insecureRefused() async throws {
        try await TestApp.withRouter { client in
            let apple = try await client.send(
                .post, "/api/docket/push/subscriptions", json: #"{"kind":"apns","token":"\#(String(repeating: "ab", count: 32))"}"#
            )
            #expect(apple.status == .badRequest && apple.errorMessage == "This docketd does not send to Apple's push service")
            for endpoint in ["http://push.example.com/x", "https://127.0.0.1/x", "https://10.0.0.1/x", "https://[::1]/x", "https://169.254.169.254/x"] {
                let refused = try await client.send(.post, "/api/docket/push/subscriptions", json: Self.subscription(endpoint))
                #expect(refused.status == .badRequest, "\(endpoint)")
            }
        }
    }

    @Test("removing a device: only one's own (another's is 404, also for an admin); then it is gone")
    func unsubscribe() async throws {
        try await TestApp.withRouter(configure: { $0.pushAllowInsecureEndpoints = true }) { client in
            let id = try await client.send(.post, "/api/docket/push/subscriptions", json: Self.subscription("http://127.0.0.1:9/p"))
                .result.string("sys_id")
            #expect(try await client.send(.delete, "/api/docket/push/subscriptions/\(id)", json: nil, headers: .beth).status == .notFound)
            #expect(try await client.send(.delete, "/api/docket/push/subscriptions/\(id)", json: nil, headers: .admin).status == .notFound)
            #expect(try await client.send(.delete, "/api/docket/push/subscriptions/not-an-id", json: nil).status == .notFound)
            #expect(try await client.send(.delete, "/api/docket/push/subscriptions/\(id)", json: nil).status == .noContent)
            #expect(try await client.send(.delete, "/api/docket/push/subscriptions/\(id)", json: nil).status == .notFound)
        }
    }

    @Test("notifications: one's own, newest first, unread filter and count; marked read through the Table API; nothing else writable")
    func inbox() async throws {
        try await TestApp.withRouter { client in
            let john = DemoData.userID("john.doe")
            var ids: [String] = []
            for (index, user) in [john, john, DemoData.userID("beth.anglin")].enumerated() {
                let created = try await client.send(.post, "/api/now/table/sys_notification", json: """
                    {"user":"\(user)","subject":"Message \(index)","message":"Body \(index)","table_name":"incident",\
                    "document":"\(Demo.incident1)","event":"\(index)","read":"false"}
                    """, headers: .admin)
                #expect(created.status == .created)
                ids.append(try created.result.string("sys_id"))
                try await Task.sleep(for: .milliseconds(1100))
            }
            let listed = try await client.get("/api/docket/notifications")
            #expect(listed.status == .ok)
            #expect(try listed.results.map { $0.string("subject") } == ["Message 1", "Message 0"])
            #expect(try listed.results.first?.string("url") == "/app/item/incident/\(Demo.incident1)")
            #expect(listed.headers[.init("X-Unread-Count")!] == "2")
            #expect(try await client.get("/api/docket/notifications", .beth).results.map { $0.string("subject") } == ["Message 2"])
            let read = try await client.send(.patch, "/api/now/table/sys_notification/\(ids[0])", json: #"{"read":"true"}"#)
            #expect(read.status == .ok)
            let unread = try await client.get("/api/docket/notifications?unread=true")
            #expect(try unread.results.map { $0.string("subject") } == ["Message 1"])
            #expect(unread.headers[.init("X-Unread-Count")!] == "1")
            #expect(try await client.get("/api/docket/notifications?sysparm_limit=1").results.count == 1)
            let rewrite = try await client.send(.patch, "/api/now/table/sys_notification/\(ids[0])", json: #"{"subject":"Forged"}"#)
            #expect(rewrite.status == .forbidden)
            let others = try await client.send(.patch, "/api/now/table/sys_notification/\(ids[2])", json: #"{"read":"true"}"#)
            #expect(others.status == .notFound || others.status == .forbidden)
            for bad in ["sysparm_limit=abc", "sysparm_limit=0", "sysparm_offset=-1", "unread=maybe"] {
                #expect(try await client.get("/api/docket/notifications?\(bad)").status == .badRequest, "\(bad)")
            }
            #expect(try await client.get("/api/docket/notifications", [:]).status == .unauthorized)
        }
    }

    @Test("the event stream with notifications=true: the unread count in ready, one's own new messages as notification events, nobody else's; bad values are 400")
    func inboxStream() async throws {
        try await TestApp.withRouter { client in
            for value in ["maybe", "1", "yes", "TRUE%00", String(repeating: "t", count: 5000)] {
                let refused = try await client.get("/api/docket/events?notifications=\(value)&follow=false")
                #expect(refused.status == .badRequest, "notifications=\(value.prefix(20))")
                #expect(refused.errorMessage == "Invalid notifications")
            }
            #expect(try await client.get("/api/docket/events?notifications=true&follow=false", [:]).status == .unauthorized)
            let before = LiveEventsTests.messages(String(buffer: try await client.get("/api/docket/events?follow=false").body))
            let since = try #require(before.first?["id"])
            let john = DemoData.userID("john.doe")
            for (index, user) in [john, DemoData.userID("beth.anglin"), john].enumerated() {
                let created = try await client.send(.post, "/api/now/table/sys_notification", json: """
                    {"user":"\(user)","subject":"Message \(index)","message":"Body \(index)","table_name":"incident",\
                    "document":"\(Demo.incident1)","read":"false"}
                    """, headers: .admin)
                #expect(created.status == .created)
            }
            func stream(_ headers: HTTPFields, inbox: Bool = true) async throws -> (ready: [String: String], notifications: [[String: String]]) {
                let response = try await client.get(
                    "/api/docket/events?follow=false&since=\(since)" + (inbox ? "&notifications=true" : ""), headers
                )
                #expect(response.status == .ok)
                let messages = LiveEventsTests.messages(String(buffer: response.body))
                return (messages.first ?? [:], messages.filter { $0["event"] == "notification" })
            }
            let johns = try await stream(.john)
            #expect(johns.ready["data"]?.contains(#""unread":2"#) == true, "\(johns.ready)")
            #expect(johns.notifications.compactMap { $0["data"] }.map { $0.contains("Message 0") || $0.contains("Message 2") } == [true, true])
            #expect(johns.notifications.allSatisfy { $0["data"]?.contains(#""url":"/app/notifications/"#) == true })
            let beths = try await stream(.beth)
            #expect(beths.ready["data"]?.contains(#""unread":1"#) == true, "\(beths.ready)")
            #expect(beths.notifications.count == 1)
            #expect(beths.notifications.first?["data"]?.contains("Message 1") == true)
            // Without the parameter: no count and no notification events.
            let plain = try await stream(.john, inbox: false)
            #expect(plain.ready["data"]?.contains("unread") == false)
            #expect(plain.notifications.isEmpty)
        }
    }
}
