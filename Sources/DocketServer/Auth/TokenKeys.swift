import Crypto
import Foundation
import JWTKit

/// The keys docketd signs its JSON Web Tokens with, as a key set (jwt-kit's `JWTKeyCollection`): every token's
/// header names its key (`kid`), so that a key can be added and made current while tokens signed with an earlier
/// one still verify. Today one HS512 key, derived from the instance secret all instances sharing a database
/// read (``SigningKey``); tokens issued before keys had ids (no `kid`) verify with it too.
struct TokenKeys: Sendable {
    /// The key set.
    let keys: JWTKeyCollection
    /// The id of the key new tokens are signed with.
    let currentID: String
    /// The instance secret, for what is not a JWT (sealed handles, CSRF tokens), each under a key of its own.
    let secret: [UInt8]

    static func make(secret: [UInt8]) async -> TokenKeys {
        let id = keyID(secret)
        let keys = JWTKeyCollection()
        // Added with its id, it is also the default, which verifies tokens that name no key.
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha512, kid: JWKIdentifier(string: id))
        return TokenKeys(keys: keys, currentID: id, secret: secret)
    }

    /// A key's id: public, stable for the key, and telling nothing of it (an HMAC of a fixed label under it).
    static func keyID(_ secret: [UInt8]) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Data("docket key id".utf8), using: SymmetricKey(data: secret))
        return "hs512-" + Base64URL.encode(Array(code).prefix(9))
    }

    /// Signs `payload` with the current key (HS512), its id in the header.
    func sign(_ payload: some JWTPayload) async throws -> String {
        try await keys.sign(payload, kid: JWKIdentifier(string: currentID))
    }

    /// The payload of a token signed by one of the keys; nil when it is not one (malformed, another key, another
    /// algorithm, a payload of another shape). Checking claims such as the expiry is the payload's, and the
    /// caller's.
    func verify<Payload: JWTPayload>(_ token: String, as type: Payload.Type) async -> Payload? {
        do {
            return try await keys.verify(token, as: type)
        } catch {
            // Every failure here is the token's (no storage is read): it is simply not a valid token.
            return nil
        }
    }
}
