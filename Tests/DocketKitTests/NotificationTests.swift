import DocketModel
import Foundation
import Testing

@testable import DocketKit

@Suite("Push registrations and keys")
struct NotificationTests {
    static let rfcBody = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"

    @Test("WebPushKeys reads RFC 8291's example message with the user agent's keys of its Appendix A; other keys or a damaged message are refused")
    func decryptsTheRFCExample() throws {
        let keys = WebPushKeys(
            privateKey: "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94",
            p256dh: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", auth: "BTBZMqHH6r4Tts7J_aSIgg"
        )
        let body = Data(try #require(WebPushKeys.decode(Self.rfcBody)))
        #expect(String(decoding: try keys.decrypt(body), as: UTF8.self) == "When I grow up, I want to be a watermelon")
        #expect(throws: DocketError.self) { try WebPushKeys.generate().decrypt(body) }
        var damaged = body
        damaged[damaged.count - 1] ^= 1
        #expect(throws: DocketError.self) { try keys.decrypt(damaged) }
        #expect(throws: DocketError.self) { try keys.decrypt(body.prefix(40)) }
        #expect(throws: DocketError.self) { try keys.decrypt(Data()) }
    }

    @Test("new keys: a P-256 public key of 65 bytes and a 16-byte secret, different each time")
    func generates() {
        let (one, two) = (WebPushKeys.generate(), WebPushKeys.generate())
        #expect(WebPushKeys.decode(one.p256dh)?.count == 65 && WebPushKeys.decode(one.p256dh)?.first == 4)
        #expect(WebPushKeys.decode(one.auth)?.count == 16 && WebPushKeys.decode(one.privateKey)?.count == 32)
        #expect(one != two)
    }

    @Test("registrations as docketd takes them: an APNs token as hex (never NSData's description), UnifiedPush with its kind")
    func bodies() {
        let token = Data((0..<32).map { UInt8($0) })
        let apple = PushRegistration.apns(deviceToken: token, name: "iPhone").body
        #expect(apple["kind"]?.stringValue == "apns")
        #expect(apple["token"]?.stringValue == "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        #expect(apple["name"]?.stringValue == "iPhone")
        let unified = PushRegistration.unifiedPush(endpoint: "https://ntfy.example/up1", p256dh: "P", auth: "A").body
        #expect(unified["kind"]?.stringValue == "unifiedpush" && unified["keys"]?["p256dh"]?.stringValue == "P" && unified["name"] == nil)
        let web = PushRegistration.webPush(endpoint: "https://fcm.example/x", p256dh: "P", auth: "A", name: "Chrome").body
        #expect(web["kind"] == nil && web["endpoint"]?.stringValue == "https://fcm.example/x")
    }
}
