import AsyncHTTPClient
import Crypto
import DocketKit
import DocketModel
import DocketTestSupport
import Foundation
import NIOCore
import Synchronization
import Testing

@testable import DocketServer

/// What a stranger tries at docketd's newer doors, each as the attack it is, against a live server: the push
/// registry, the dispatcher, the endpoint guard. Every test here failed before its fix.
@Suite("An attacker's day")
struct AttackersDayTests {
    static let web = DemoNotifications.variants[2]

    /// A browser subscription (as `PushManager` gives it) to `endpoint`, as the UPS web variant's device token.
    static func webToken(_ endpoint: String) -> String {
        let key = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
        let subscription = JSONValue(members: [
            ("endpoint", .string(endpoint)),
            ("keys", JSONValue(members: [
                ("p256dh", .string(Base64URL.encode(Array(key)))), ("auth", .string(Base64URL.encode(Array(repeating: 7, count: 16)))),
            ])),
        ])
        return Data(subscription.serialized()).base64EncodedString()
    }

    static func post(
        _ url: String, _ body: String, basic: (String, String)? = nil, extra: [(String, String)] = [], form: Bool = false
    ) async throws -> (status: Int, body: String) {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: form ? "application/x-www-form-urlencoded" : "application/json")
        if let (user, secret) = basic {
            request.headers.add(name: "Authorization", value: "Basic " + Data("\(user):\(secret)".utf8).base64EncodedString())
        }
        for (name, value) in extra { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(20))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), String(buffer: bytes))
    }

    static func installation(_ token: String, alias: String) -> String {
        #"{"deviceToken":"\#(token)","deviceType":"web","alias":"\#(alias)","categories":[]}"#
    }

    @Test(
        "an anonymous device registered with the public variant credentials and alias admin receives nothing of the administrator's; the sender API still reaches it by alias",
        .timeLimit(.minutes(2))
    )
    func anonymousAliasAdmin() async throws {
        try await withPushReceiver { receiver, receiverURL in
            try await withLiveServer(configure: { $0.pushAllowInsecureEndpoints = true }) { base in
                // The attacker: variant id and secret from the public mobile-services.json, the alias of the victim.
                let stolen = try await Self.post(
                    base + "/rest/registry/device", Self.installation(Self.webToken(receiverURL + "/up/attacker"), alias: "admin"),
                    basic: (Self.web.1, Self.web.2)
                )
                #expect(stolen.status == 200, "\(stolen.body)")
                // The administrator's own app, which proves who it is: the control that notifications do flow.
                let admin = try DocketClient(instance: base, credentials: .basic(userName: "admin", password: "admin"))
                let grant = try await Self.post(
                    base + "/oauth_token.do", "grant_type=password&client_id=docket-demo&client_secret=docket-demo-secret&username=admin&password=admin",
                    form: true
                )
                let token = try #require(try JSONValue.parse(Array(grant.body.utf8))["access_token"]?.stringValue)
                SuiteLog.credential(token)
                let own = try await Self.post(
                    base + "/rest/registry/device", Self.installation(Self.webToken(receiverURL + "/up/admin"), alias: "admin"),
                    basic: (Self.web.1, Self.web.2), extra: [("X-Docket-Authorization", "Bearer " + token)]
                )
                #expect(own.status == 200, "\(own.body)")
                let adminID = try await admin.table.records(in: "sys_user", query: try EncodedQuery("user_name=admin"), fields: ["sys_id"]).records[0].sysID
                let beth = try DocketClient(instance: base, credentials: .basic(userName: "beth.anglin", password: "password"))
                _ = try await beth.table.createRecord(with: ["short_description": "Root password rotation", "assigned_to": adminID], in: "incident")
                let deadline = ContinuousClock.now + .seconds(15)
                while !receiver.messages.contains(where: { $0.name == "admin" }), ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(receiver.messages.contains { $0.name == "admin" }, "the administrator's own device got nothing")
                try await Task.sleep(for: .milliseconds(500))
                #expect(!receiver.messages.contains { $0.name == "attacker" }, "the anonymous alias-admin device received the administrator's notification")
                // What the alias is for: the sender API, with the master secret, reaches the device by its alias.
                let sent = try await Self.post(
                    base + "/rest/sender", #"{"message":{"alert":"Release tonight"},"criteria":{"alias":["admin"]}}"#,
                    basic: (DemoNotifications.pushApplicationKey, DemoNotifications.pushMasterSecret)
                )
                #expect(sent.status == 202)
                let sentDeadline = ContinuousClock.now + .seconds(60)
                while !receiver.messages.contains(where: { $0.name == "attacker" }), ContinuousClock.now < sentDeadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(receiver.messages.contains { $0.name == "attacker" })
            }
        }
    }

    /// A resolver that answers `first` once and `then` ever after, counting its calls.
    final class RebindingResolver: Sendable {
        let calls = Mutex(0)
        let first: [UInt8]
        let then: [UInt8]
        init(first: [UInt8], then: [UInt8]) {
            self.first = first
            self.then = then
        }
        func resolve(_ host: String) async throws -> [[UInt8]] {
            let call = calls.withLock { $0 += 1; return $0 }
            return [call == 1 ? first : then]
        }
    }

    @Test("DNS rebinding: a name that answers a loopback receiver first and the metadata address after is resolved once, and the push goes to the address checked, with the name as its Host", .timeLimit(.minutes(1)))
    func rebinding() async throws {
        try await withPushReceiver { receiver, receiverURL in
            let port = try #require(URL(string: receiverURL)?.port)
            let resolver = RebindingResolver(first: [127, 0, 0, 1], then: [169, 254, 169, 254])
            var endpoints = EndpointGuard(allowInsecure: true)
            endpoints.resolve = { try await resolver.resolve($0) }
            let http = PushHTTPClient()
            let channel = WebPushChannel(
                http: http, vapid: VAPIDKey(key: P256.Signing.PrivateKey(), subject: "mailto:ops@example.com"), endpoints: endpoints
            )
            let keys = P256.KeyAgreement.PrivateKey().publicKey.x963Representation
            let target = PushTarget(
                subscription: "s1", kind: "webpush", endpoint: "http://rebind.docket.test:\(port)/up/rebound",
                p256dh: Base64URL.encode(Array(keys)), auth: Base64URL.encode(Array(repeating: 1, count: 16)), token: ""
            )
            let message = PushMessage(notification: "n1", subject: "s", message: "m", table: "incident", document: "d1")
            let outcome = await channel.send(message, to: target)
            #expect(outcome == .delivered)
            #expect(resolver.calls.withLock { $0 } == 1)
            #expect(receiver.messages.first?.headers["host"] == "rebind.docket.test:\(port)")
            // The second time the name leads to the metadata service: refused before any connection.
            #expect(await channel.send(message, to: target) == .gone(status: 0))
            #expect(receiver.messages.count == 1)
            // A name that does not resolve (a DNS hiccup, or a lookup past its time) is tried again later: the
            // subscription is not given up as it is for an address docketd refuses.
            var failing = endpoints
            failing.resolve = { _ in throw EndpointGuard.Refusal(description: "SERVFAIL") }
            let flaky = WebPushChannel(http: http, vapid: channel.vapid, endpoints: failing)
            #expect(await flaky.send(message, to: target) == .retry(status: 0, after: nil))
            try await http.shutdown()
        }
    }

    @Test("the endpoint guard refuses link-local and metadata addresses even with --push-allow-insecure-endpoints, and a resolver that hangs for its time limit", .timeLimit(.minutes(1)))
    func guardLimits() async throws {
        let addresses: [String: [[UInt8]]] = [
            "metadata.example": [[169, 254, 169, 254]], "alibaba.example": [[100, 100, 100, 200]],
            "aws6.example": [[0xFD, 0, 0x0E, 0xC2] + Array(repeating: 0, count: 10) + [0x02, 0x54]],
            "linklocal6.example": [[0xFE, 0x80] + Array(repeating: 0, count: 13) + [1]],
            "mapped.example": [Array(repeating: 0, count: 10) + [0xFF, 0xFF, 169, 254, 1, 1]],
            "loopback.example": [[127, 0, 0, 1]],
        ]
        var insecure = EndpointGuard(allowInsecure: true)
        insecure.resolve = { host in
            if host == "slow.example" { try await Task.sleep(for: .seconds(30)) }
            return addresses[host] ?? []
        }
        insecure.resolveLimit = .milliseconds(200)
        for host in ["metadata.example", "alibaba.example", "aws6.example", "linklocal6.example", "mapped.example", "169.254.169.254", "[fe80::1]"] {
            await #expect(throws: EndpointGuard.Refusal.self, "\(host)") { try await insecure.pin("http://\(host)/push") }
        }
        let loopback = try await insecure.pin("http://loopback.example:8080/push")
        #expect(loopback.address == "127.0.0.1" && loopback.host == "loopback.example" && !loopback.isLiteral)
        #expect(try await insecure.pin("http://[::1]:8080/push").isLiteral)
        // The resolver sleeps 30 s: the refusal that names the time limit shows the 200 ms limit ended it.
        await #expect(throws: EndpointGuard.Refusal(description: "the endpoint's host slow.example did not resolve in time", transient: true)) {
            try await insecure.pin("https://slow.example/push")
        }
    }
}

/// docketd's own access tokens: accepted with the issuer their session began with and docketd's audience only.
@Suite("An attacker's day: docketd's own tokens")
struct OwnTokenTests {
    @Test("an access token is accepted only with its session's exact issuer (or --public-url's) and docketd's audience")
    func exactIssuer() async throws {
        try await TestApp.withStore { store in
            let (identity, hasher) = TestApp.identity(on: store)
            defer { Task { await hasher.shutdown() } }
            let keys = try await TokenKeys.load(storage: store.storage, secret: Array(repeating: 5, count: 64))
            func provider(publicURL: String? = nil) -> OpenIDProvider {
                OpenIDProvider(
                    realm: "docket", storage: store.storage, keys: keys, directory: OAuthDirectory(store: store), oauth: identity.oauth,
                    authenticator: identity.authenticator, publicURL: publicURL
                )
            }
            let open = provider()
            let answer = try await open.token(
                form: ["grant_type": "password", "username": "john.doe", "password": "password"], basic: ("docket-demo", "docket-demo-secret"),
                issuer: "http://docket.example/realms/docket", identity: identity, address: "10.0.0.1"
            )
            let token = try #require(answer["access_token"]?.stringValue)
            let claims = try #require(try await open.access(token)).claims
            #expect(claims.iss == "http://docket.example/realms/docket")
            // The same session's claims signed with docketd's key but naming another host (what a Host header
            // could once mint), or another audience: neither is this session's token.
            var elsewhere = claims
            elsewhere.iss = "http://evil.example/realms/docket"
            elsewhere.jti = "other-1"
            #expect(try await open.access(try await keys.sign(elsewhere, family: .rs256)) == nil)
            var audience = claims
            audience.aud = "some-other-api"
            audience.jti = "other-2"
            #expect(try await open.access(try await keys.sign(audience, family: .rs256)) == nil)
            // Behind --public-url, only its issuers are docketd's.
            #expect(try await provider(publicURL: "https://docket.example.com/").access(token) == nil)
            let behind = provider(publicURL: "https://docket.example.com")
            let minted = try await behind.token(
                form: ["grant_type": "password", "username": "john.doe", "password": "password"], basic: ("docket-demo", "docket-demo-secret"),
                issuer: "https://docket.example.com/realms/docket", identity: identity, address: "10.0.0.1"
            )
            #expect(try await behind.access(try #require(minted["access_token"]?.stringValue)) != nil)
        }
    }
}

/// What a failure must not be turned into: a "from now" subscription whose head cannot be read starting at the
/// beginning of the log (replaying every change to the subscriber), and a statement with more parameters than the
/// database takes.
@Suite("An attacker's day: failures and sizes")
struct FailureTurnedAnswerTests {
    @Test("a subscription from now whose head of the log cannot be read is refused, on both GraphQL sockets (not started at sequence 0)")
    func headUnreadable() async throws {
        try await TestApp.withStore { store in
            let directory = TemporaryDirectory()
            let configuration = TestApp.configuration(dataDirectory: directory.path)
            let (identity, hasher) = TestApp.identity(on: store)
            let dataSync = DataSyncSocketDialect(
                controller: try DataSyncController(store: store, configuration: configuration),
                logins: SocketLogins(identity: identity, acceptsSessionCookie: false)
            )
            let now = NowGraphQLSocketDialect(
                controller: NowGraphQLController(store: store, configuration: configuration),
                logins: SocketLogins(identity: identity, acceptsSessionCookie: true)
            )
            // The head's read: MAX(seq) on SQLite, the newest settled event on PostgreSQL.
            func isRefusedAsUnavailable(_ operation: SocketOperation) -> Bool {
                guard case .refused(let errors) = operation else { return false }
                return errors.first?["message"]?.stringValue?.contains("unavailable") == true
            }
            store.storage.faults.failNext { $0.contains("MAX(seq)") || $0.contains("e.seq DESC") }
            #expect(isRefusedAsUnavailable(await dataSync.operation(.init(query: "subscription add { taskAdded { id } }"), caller: Callers.john)))
            store.storage.faults.failNext { $0.contains("MAX(seq)") || $0.contains("e.seq DESC") }
            #expect(isRefusedAsUnavailable(await now.operation(.init(query: GraphQLSocketTests.incidents), caller: Callers.john)))
            // With the database answering, both start (at its head).
            if case .stream = await dataSync.operation(.init(query: "subscription add { taskAdded { id } }"), caller: Callers.john) {} else {
                Issue.record("the DataSync subscription did not start")
            }
            await hasher.shutdown()
        }
    }

    @Test("a message to more devices than a statement takes parameters (40,000 ids, SQLite's limit is 32,766) is written, to exactly the devices that exist")
    func boundedLists() async throws {
        try await TestApp.withStore { store in
            var real: [String] = []
            for index in 0..<3 { real.append(try await NotifierTests.device(store, Callers.john, "d\(index)")) }
            let ids = (0..<40_000).map { String(format: "%032x", $0) } + real
            let event = try await store.storage.write { db in
                try await Notifier.write(["user": "", "subject": "Release", "message": "Tonight"], to: .subscriptions(ids), store: store, db: db)
            }
            let rows = try await NotifierTests.rows(store, "SELECT subscription FROM docket_push_delivery WHERE notification = " + .bind(event.sysID))
            #expect(Set(try rows.map { try $0.value(at: "subscription", kind: .text).text ?? "" }) == Set(real))
            // A user's message that skips more muted devices than that: the others get it.
            let muted = (0..<40_000).map { String(format: "%032x", $0 + 100_000) } + [real[0]]
            let second = try await store.storage.write { db in
                try await Notifier.write(["user": Callers.john.userID, "subject": "S", "message": "M"], to: .devicesOf(Callers.john.userID, except: muted), store: store, db: db)
            }
            let delivered = try await NotifierTests.rows(store, "SELECT subscription FROM docket_push_delivery WHERE notification = " + .bind(second.sysID))
            #expect(Set(try delivered.map { try $0.value(at: "subscription", kind: .text).text ?? "" }) == Set(real.dropFirst()))
        }
    }
}
