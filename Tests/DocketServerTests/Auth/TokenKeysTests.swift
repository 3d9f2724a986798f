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
        let keys = await TokenKeys.make(secret: Self.secret)
        let token = try await keys.sign(CompassTokens.Payload(sub: "a", repo: "r", db: "d", iat: 1, exp: 2, sid: "s"))
        let first = try #require(token.split(separator: ".").first)
        let header = try JSONValue.parse(try #require(Base64URL.decode(first)))
        #expect(header["alg"]?.stringValue == "HS512")
        #expect(header["kid"]?.stringValue == keys.currentID)
        #expect(TokenKeys.keyID(Self.secret) == keys.currentID)
        #expect(TokenKeys.keyID(Array(Self.secret.reversed())) != keys.currentID)
        #expect(!keys.currentID.contains(Base64URL.encode(Self.secret.prefix(6))))
        #expect(await keys.verify(token, as: CompassTokens.Payload.self)?.sub == "a")
    }

    @Test("a token from before key ids verifies; another secret, another algorithm, none, or a changed payload does not")
    func verification() async throws {
        let keys = await TokenKeys.make(secret: Self.secret)
        #expect(await keys.verify(Self.unnamedToken(Self.payload), as: CompassTokens.Payload.self)?.sub == "john.doe")
        let other = Self.unnamedToken(Self.payload, secret: Array(repeating: 7, count: 64))
        #expect(await keys.verify(other, as: CompassTokens.Payload.self) == nil)
        // HS256 under the same secret: the key verifies HS512 only.
        #expect(await keys.verify(Self.unnamedToken(Self.payload, alg: "HS256"), as: CompassTokens.Payload.self) == nil)
        let none = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + Base64URL.encode(Array(Self.payload.utf8)) + "."
        #expect(await keys.verify(none, as: CompassTokens.Payload.self) == nil)
        let parts = Self.unnamedToken(Self.payload).split(separator: ".")
        let changed = parts[0] + "." + Base64URL.encode(Array(Self.payload.replacingOccurrences(of: "john.doe", with: "admin").utf8)) + "." + parts[2]
        #expect(await keys.verify(String(changed), as: CompassTokens.Payload.self) == nil)
        for garbage in ["", "a.b", "a.b.c", "....", String(repeating: "x", count: 20_000)] {
            #expect(await keys.verify(garbage, as: CompassTokens.Payload.self) == nil)
        }
        // A well-signed token of another shape (no sid) is no Compass token.
        let shapeless = Self.unnamedToken(#"{"sub":"john.doe"}"#)
        #expect(await keys.verify(shapeless, as: CompassTokens.Payload.self) == nil)
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
