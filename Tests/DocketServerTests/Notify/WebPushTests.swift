import Crypto
import DocketModel
import Foundation
import Testing

@testable import DocketServer

/// Web Push's message encryption (RFC 8291), VAPID (RFC 8292), the payload, and the guard on endpoints. The
/// end-to-end test (Tests/Push) decrypts with http-ece and checks VAPID with py-vapid, libraries Docket did not write.
@Suite("Web Push")
struct WebPushTests {
    static func bytes(_ text: String) -> [UInt8] { Base64URL.decode(text) ?? [] }

    @Test("encryption reproduces RFC 8291's example (Appendix A), byte for byte")
    func rfcVector() throws {
        let serverKey = try P256.KeyAgreement.PrivateKey(rawRepresentation: Self.bytes("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"))
        let keys = try WebPush.SubscriptionKeys(
            p256dh: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", auth: "BTBZMqHH6r4Tts7J_aSIgg"
        )
        let body = try WebPush.encrypt(
            Array("When I grow up, I want to be a watermelon".utf8), for: keys, salt: Self.bytes("DGv6ra1nlYgDCS1FRnbzlw"), serverKey: serverKey
        )
        #expect(Base64URL.encode(body) == "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN")
        // A new key pair and salt each time otherwise.
        let again = try WebPush.encrypt(Array("x".utf8), for: keys)
        let other = try WebPush.encrypt(Array("x".utf8), for: keys)
        #expect(again != other && again.count == WebPush.headerSize + 1 + 1 + 16)
        #expect(throws: WebPush.KeyProblem.self) { try WebPush.encrypt(Array(repeating: 0, count: WebPush.maximumPlaintext + 1), for: keys) }
    }

    @Test("keys that cannot be used are refused: not a point, compressed, wrong lengths, not base64url")
    func badKeys() {
        let good = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
        for (p256dh, auth) in [
            ("", "BTBZMqHH6r4Tts7J_aSIgg"), (String(good.dropLast(4)) + "AAAA", "BTBZMqHH6r4Tts7J_aSIgg"), (good, "short"),
            (good, ""), ("!!!", "BTBZMqHH6r4Tts7J_aSIgg"), ("A" + good.dropFirst(), "BTBZMqHH6r4Tts7J_aSIgg"),
            (String(repeating: "A", count: 20_000), "BTBZMqHH6r4Tts7J_aSIgg"),
        ] {
            #expect(throws: WebPush.KeyProblem.self) { try WebPush.SubscriptionKeys(p256dh: p256dh, auth: auth) }
        }
        #expect(throws: Never.self) { try WebPush.SubscriptionKeys(p256dh: good + "=", auth: "BTBZMqHH6r4Tts7J_aSIgg==") }
    }

    @Test("VAPID: vapid t=JWT,k=key; ES256 over the push service's origin, an expiry within a day, the contact")
    func vapid() throws {
        let key = P256.Signing.PrivateKey()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let header = try WebPush.vapidAuthorization(
            endpoint: URL(string: "https://push.example.net:8443/wpush/v2/abc?x=1")!, key: key, subject: "mailto:ops@example.com", now: now
        )
        let parts = header.split(separator: " ", maxSplits: 1)
        #expect(parts.first == "vapid")
        let fields = Dictionary(uniqueKeysWithValues: parts[1].split(separator: ",").map { field in
            let pair = field.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            return (String(pair[0]), String(pair[1]))
        })
        #expect(fields["k"] == Base64URL.encode(Array(key.publicKey.x963Representation)))
        let jwt = try #require(fields["t"]).split(separator: ".").map(String.init)
        #expect(jwt.count == 3)
        let claims = try JSONValue.parse(Self.bytes(jwt[1]))
        #expect(claims["aud"]?.stringValue == "https://push.example.net:8443")
        #expect(claims["sub"]?.stringValue == "mailto:ops@example.com")
        #expect(claims["exp"]?.intValue == 1_800_000_000 + 12 * 3600)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: Self.bytes(jwt[2]))
        #expect(key.publicKey.isValidSignature(signature, for: Array((jwt[0] + "." + jwt[1]).utf8)))
        let defaultPort = try WebPush.vapidAuthorization(endpoint: URL(string: "https://fcm.googleapis.com:443/x")!, key: key, subject: "mailto:a@b")
        let claims443 = try JSONValue.parse(Self.bytes(String(defaultPort.split(separator: ".")[1])))
        #expect(claims443["aud"]?.stringValue == "https://fcm.googleapis.com")
    }

    @Test("the payload names the record and fits: a long message is shortened, never the rest")
    func payload() throws {
        let message = PushMessage(
            notification: String(repeating: "a", count: 32), subject: "INC0010001 was assigned to you",
            message: String(repeating: "é long text ", count: 1000), table: "incident", document: String(repeating: "b", count: 32)
        )
        let bytes = message.payload(limit: WebPush.maximumPlaintext)
        #expect(bytes.count <= WebPush.maximumPlaintext)
        let json = try JSONValue.parse(bytes)
        #expect(json["title"]?.stringValue == "INC0010001 was assigned to you")
        #expect(json["url"]?.stringValue == "/app/item/incident/" + String(repeating: "b", count: 32))
        #expect(json["body"]?.stringValue?.hasSuffix("…") == true)
        let short = PushMessage(notification: "n", subject: "s", message: "m", table: "t", document: "d").payload(limit: 4000)
        #expect(try JSONValue.parse(short)["body"]?.stringValue == "m")
    }

    @Test("push services' answers: 2xx sent, 404/410 gone, 429 and 5xx later (Retry-After kept), other 4xx final")
    func outcomes() {
        #expect(WebPushChannel.outcome(status: 201, retryAfter: nil) == .delivered)
        #expect(WebPushChannel.outcome(status: 410, retryAfter: nil) == .gone(status: 410))
        #expect(WebPushChannel.outcome(status: 404, retryAfter: nil) == .gone(status: 404))
        #expect(WebPushChannel.outcome(status: 429, retryAfter: " 30") == .retry(status: 429, after: 30))
        #expect(WebPushChannel.outcome(status: 503, retryAfter: "soon") == .retry(status: 503, after: nil))
        #expect(WebPushChannel.outcome(status: 413, retryAfter: nil) == .failed(status: 413))
        #expect(PushDispatcher.backoff(attempts: 1, retryAfter: nil) >= 1000)
        #expect(PushDispatcher.backoff(attempts: 40, retryAfter: nil) <= 3_600_000 + 360_000)
        #expect(PushDispatcher.backoff(attempts: 1, retryAfter: 120) == 120_000)
        #expect(PushDispatcher.backoff(attempts: 1, retryAfter: Int.max) == 86_400_000)
    }

    @Test("endpoints: public HTTPS only; loopback, private, link-local, mapped and unresolvable hosts are refused unless insecure endpoints are allowed")
    func endpointGuard() async throws {
        let addresses: [String: [[UInt8]]] = [
            "push.example.com": [[93, 184, 216, 34]], "internal.example.com": [[10, 1, 2, 3]],
            "mixed.example.com": [[93, 184, 216, 34], [127, 0, 0, 1]],
            "v6.example.com": [[0x26, 0x06, 0x47, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]],
            "mapped.example.com": [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 192, 168, 1, 1]],
        ]
        var guarded = EndpointGuard(allowInsecure: false)
        guarded.resolve = { host in
            guard let found = addresses[host] else { throw EndpointGuard.Refusal(description: "unknown") }
            return found
        }
        #expect(try await guarded.check("https://push.example.com/wpush/abc").host == "push.example.com")
        #expect(try await guarded.check("https://v6.example.com/x").host == "v6.example.com")
        for refused in [
            "http://push.example.com/x", "https://internal.example.com/x", "https://mixed.example.com/x", "https://mapped.example.com/x",
            "https://nowhere.example.com/x", "https://user:pw@push.example.com/x", "ftp://push.example.com/x", "/relative",
            "https://push.example.com/" + String(repeating: "a", count: 1000),
        ] {
            await #expect(throws: EndpointGuard.Refusal.self, "\(refused.prefix(60))") { try await guarded.check(refused) }
        }
        let insecure = EndpointGuard(allowInsecure: true)
        #expect(try await insecure.check("http://127.0.0.1:8080/push").port == 8080)
        for (address, isPublic) in [
            ([127, 0, 0, 1], false), ([10, 0, 0, 1], false), ([172, 20, 0, 1], false), ([172, 32, 0, 1], true), ([192, 168, 0, 1], false),
            ([169, 254, 169, 254], false), ([100, 64, 0, 1], false), ([0, 0, 0, 0], false), ([224, 0, 0, 1], false), ([8, 8, 8, 8], true),
        ] as [([UInt8], Bool)] {
            #expect(EndpointGuard.isPublic(address) == isPublic, "\(address)")
        }
        #expect(!EndpointGuard.isPublic(Array(repeating: 0, count: 15) + [1]))
        #expect(!EndpointGuard.isPublic([0xFE, 0x80] + Array(repeating: 0, count: 14)))
        #expect(!EndpointGuard.isPublic([0xFD, 0x00] + Array(repeating: 0, count: 14)))
    }
}
