import Crypto
import DocketModel
import Foundation
import JWTKit
import Testing

@testable import DocketServer

/// The key set Compass tokens (and next OAuth and OpenID Connect tokens) are signed with.
@Suite("Token keys")
struct TokenKeysTests {
    static let secret = (0..<64).map { UInt8($0) }

    /// A token as docketd wrote them before keys had ids: HS512 under the secret, no `kid`.
    static func unnamedToken(_ payload: String, secret: [UInt8] = secret, alg: String = "HS512") -> String {
        let body = Base64URL.encode(Array(#"{"alg":"\#(alg)","typ":"JWT"}"#.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        let key = SymmetricKey(data: secret)
        let signature =
            alg == "HS256"
            ? Array(HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: key))
            : Array(HMAC<SHA512>.authenticationCode(for: Data(body.utf8), using: key))
        return body + "." + Base64URL.encode(signature)
    }

    static let payload = #"{"sub":"john.doe","repo":"SampleRepository","db":"SAMPL","iat":1,"exp":2000000000,"sid":"s"}"#

    @Test("new tokens name their key; the id is stable for a secret, differs between secrets and is no part of it")
    func keyIDs() async throws {
        let keys = try await TokenKeys.make(secret: Self.secret)
        let token = try await keys.sign(CompassTokens.Payload(sub: "a", repo: "r", db: "d", iat: 1, exp: 2, sid: "s"))
        let first = try #require(token.split(separator: ".").first)
        let header = try JSONValue.parse(try #require(Base64URL.decode(first)))
        #expect(header["alg"]?.stringValue == "HS512")
        #expect(header["kid"]?.stringValue == keys.current().id)
        #expect(TokenKeys.keyID(Self.secret) == keys.current().id)
        #expect(TokenKeys.keyID(Array(Self.secret.reversed())) != keys.current().id)
        #expect(!keys.current().id.contains(Base64URL.encode(Self.secret.prefix(6))))
        #expect(try await keys.verify(token, as: CompassTokens.Payload.self)?.sub == "a")
    }

    @Test("a token from before key ids verifies; another secret, another algorithm, none, or a changed payload does not")
    func verification() async throws {
        let keys = try await TokenKeys.make(secret: Self.secret)
        #expect(try await keys.verify(Self.unnamedToken(Self.payload), as: CompassTokens.Payload.self)?.sub == "john.doe")
        let other = Self.unnamedToken(Self.payload, secret: Array(repeating: 7, count: 64))
        #expect(try await keys.verify(other, as: CompassTokens.Payload.self) == nil)
        // HS256 under the same secret: the key verifies HS512 only.
        #expect(try await keys.verify(Self.unnamedToken(Self.payload, alg: "HS256"), as: CompassTokens.Payload.self) == nil)
        let none = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + Base64URL.encode(Array(Self.payload.utf8)) + "."
        #expect(try await keys.verify(none, as: CompassTokens.Payload.self) == nil)
        let parts = Self.unnamedToken(Self.payload).split(separator: ".")
        let changed = parts[0] + "." + Base64URL.encode(Array(Self.payload.replacingOccurrences(of: "john.doe", with: "admin").utf8)) + "." + parts[2]
        #expect(try await keys.verify(String(changed), as: CompassTokens.Payload.self) == nil)
        for garbage in ["", "a.b", "a.b.c", "....", String(repeating: "x", count: 20_000)] {
            #expect(try await keys.verify(garbage, as: CompassTokens.Payload.self) == nil)
        }
        // A well-signed token of another shape (no sid) is no Compass token.
        let shapeless = Self.unnamedToken(#"{"sub":"john.doe"}"#)
        #expect(try await keys.verify(shapeless, as: CompassTokens.Payload.self) == nil)
    }

    /// The ids of the shared-secret (HS512) keys, oldest first.
    static func shared(_ keys: [SigningKeyStore.Key]) -> [String] { keys.filter { $0.algorithm == "HS512" }.map(\.id) }

    static func payload(_ user: String) -> CompassTokens.Payload {
        CompassTokens.Payload(sub: user, repo: "SampleRepository", db: "SAMPL", iat: 1, exp: 2_000_000_000, sid: "s")
    }

    @Test("rotation: the first key is the instance secret; a new key signs from its moment; old tokens verify until their key is removed; another instance learns the new key from a token that names it")
    func rotation() async throws {
        try await TestApp.withStore { store in
            let secret = (0..<64).map { _ in UInt8.random(in: .min ... .max) }
            // A database whose keys are not made yet (the test template has them).
            try await store.storage.write { db in try await db.run("DELETE FROM docket_signing_key") }
            let keys = try await TokenKeys.load(storage: store.storage, secret: secret, now: 1_000)
            let other = try await TokenKeys.load(storage: store.storage, secret: secret, now: 1_000)
            #expect(Self.shared(keys.keys) == [TokenKeys.keyID(secret)])
            let unnamed = Self.unnamedToken(Self.payload, secret: secret)
            #expect(try await keys.verify(unnamed, as: CompassTokens.Payload.self)?.sub == "john.doe")
            let first = try await keys.sign(Self.payload("first"), now: 1_000)
            #expect(TokenKeys.keyID(of: first) == TokenKeys.keyID(secret))

            let second = try #require(try await SigningKeyStore.rotate(store.storage, secret: secret, now: 1_000, lead: 60, families: [.hs512]).first)
            #expect(second.signsFrom == 1_060)
            // Before its moment the new key is known but does not sign; from it, it does.
            #expect(TokenKeys.keyID(of: try await keys.sign(Self.payload("early"), now: 1_040)) == TokenKeys.keyID(secret))
            let later = try await keys.sign(Self.payload("later"), now: 1_060)
            #expect(TokenKeys.keyID(of: later) == second.id)
            #expect(keys.current(now: 1_060).id == second.id)
            // Tokens signed before the rotation still verify, here and on another instance, which loads the new
            // key when a token names it.
            #expect(try await keys.verify(first, as: CompassTokens.Payload.self)?.sub == "first")
            #expect(try await keys.verify(unnamed, as: CompassTokens.Payload.self)?.sub == "john.doe")
            #expect(!other.keys.contains { $0.id == second.id })
            #expect(try await other.verify(later, as: CompassTokens.Payload.self, now: 1_061)?.sub == "later")
            #expect(Self.shared(other.keys) == [TokenKeys.keyID(secret), second.id])

            // Once the new key has signed for longer than any token lives, the next rotation removes the first.
            let removal = 1_060 + SigningKeyStore.retention
            let third = try #require(try await SigningKeyStore.rotate(store.storage, secret: secret, now: removal, lead: 0, families: [.hs512]).first)
            try await keys.reload(now: removal)
            #expect(Self.shared(keys.keys) == [second.id, third.id])
            #expect(try await keys.verify(first, as: CompassTokens.Payload.self, now: removal) == nil)
            #expect(try await keys.verify(unnamed, as: CompassTokens.Payload.self, now: removal) == nil)
            #expect(try await keys.verify(later, as: CompassTokens.Payload.self, now: removal)?.sub == "later")
            // A key made up by a client is no key: the token is refused (after one look at storage).
            let forged = Base64URL.encode(Array(#"{"alg":"HS512","kid":"hs512-madeup"}"#.utf8)) + "." + String(later.split(separator: ".")[1])
                + "." + String(later.split(separator: ".")[2])
            #expect(try await keys.verify(forged, as: CompassTokens.Payload.self, now: removal + 10) == nil)
        }
    }

    @Test("a key set that cannot be loaded again is an error, never an invalid token; signing then makes no token")
    func unavailable() async throws {
        try await TestApp.withStore { store in
            let faulty = FaultyStorage()
            let storage = faulty.wrap(store.storage)
            let secret = Array(repeating: UInt8(9), count: 64)
            let keys = try await TokenKeys.load(storage: storage, secret: secret, now: 1_000)
            let rotated = try #require(try await SigningKeyStore.rotate(storage, secret: secret, now: 1_000, lead: 0, families: [.hs512]).first)
            let other = try await TokenKeys.load(storage: storage, secret: secret, now: 1_000)
            let named = try await other.sign(Self.payload("named"), now: 1_001)
            #expect(TokenKeys.keyID(of: named) == rotated.id)
            faulty.setDown(true)
            await #expect(throws: StorageUnavailable.self) {
                _ = try await keys.verify(named, as: CompassTokens.Payload.self, now: 1_001)
            }
            await #expect(throws: StorageUnavailable.self) {
                _ = try await keys.sign(Self.payload("late"), now: 1_000 + TokenKeys.reloadInterval)
            }
            faulty.setDown(false)
            #expect(try await keys.verify(named, as: CompassTokens.Payload.self, now: 1_010)?.sub == "named")
        }
    }

    @Test("docketd keys: list shows one current key per family (HS512, RS256); rotate adds the next of each, and the first then verifies until a day after")
    func administration() async throws {
        let directory = TemporaryDirectory()
        let configuration = TestApp.configuration(dataDirectory: directory.path)
        try await buildApplication(configuration).test(.router) { _ in }
        let listed = try await KeyAdministration.list(in: configuration)
        #expect(Set(listed.map(\.algorithm)) == ["HS512", "RS256"])
        #expect(listed.allSatisfy { $0.state() == "current" && $0.verifiesUntil == nil })
        let rotated = try await KeyAdministration.rotate(in: configuration, lead: 60)
        #expect(rotated.count == 4)
        for family in ["HS512", "RS256"] {
            let keys = rotated.filter { $0.algorithm == family }
            #expect(keys.map { $0.state() } == ["current", "next"])
            #expect(keys[0].id == listed.first { $0.algorithm == family }?.id)
            let until = try #require(keys[0].verifiesUntil)
            #expect(until == keys[1].signsFrom.addingTimeInterval(TimeInterval(SigningKeyStore.retention)))
            #expect(keys.map { $0.state(at: keys[1].signsFrom) } == ["retired", "current"])
        }
    }

    @Test("the RS256 family: a new key is published before it signs; a token of one family is never accepted by the other")
    func families() async throws {
        try await TestApp.withStore { store in
            let secret = Array(repeating: UInt8(5), count: 64)
            let keys = try await TokenKeys.load(storage: store.storage, secret: secret, now: 1_000)
            let first = keys.current(.rs256, now: 1_000)
            let next = try #require(try await SigningKeyStore.rotate(store.storage, secret: secret, now: 1_000, lead: 60, families: [.rs256]).first)
            #expect(next.algorithm == "RS256")
            try await keys.reload(now: 1_000)
            let published = try await keys.publishedKeys(now: 1_000)["keys"]?.arrayValue?.compactMap { $0["kid"]?.stringValue } ?? []
            #expect(published.contains(first.id) && published.contains(next.id))
            #expect(TokenKeys.keyID(of: try await keys.sign(Self.payload("a"), family: .rs256, now: 1_030)) == first.id)
            #expect(TokenKeys.keyID(of: try await keys.sign(Self.payload("b"), family: .rs256, now: 1_060)) == next.id)
            let rsa = try await keys.sign(Self.payload("c"), family: .rs256, now: 1_060)
            #expect(try await keys.verify(rsa, as: CompassTokens.Payload.self, family: .rs256, now: 1_060)?.sub == "c")
            #expect(try await keys.verify(rsa, as: CompassTokens.Payload.self, now: 1_060) == nil)
            let hmac = try await keys.sign(Self.payload("d"), now: 1_060)
            #expect(try await keys.verify(hmac, as: CompassTokens.Payload.self, family: .rs256, now: 1_060) == nil)
            #expect(try TokenKeys.keyID(rsa: next.material) == next.id)
        }
    }

    @Test("base64url: no padding, URL alphabet, refuses what is not base64url")
    func base64url() {
        #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
        #expect(Base64URL.decode("-_8") == [0xfb, 0xff])
        #expect(Base64URL.decode("+/8") == nil)
        #expect(Base64URL.decode("a") == nil)
        #expect(Base64URL.decode(String(repeating: "A", count: Base64URL.maxLength + 4)) == nil)
        #expect(Base64URL.random(bytes: 24).count == 32)
    }
}
