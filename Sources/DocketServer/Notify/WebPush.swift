import Crypto
import Foundation

/// Message encryption for Web Push (RFC 8291, the `aes128gcm` content coding of RFC 8188 in one record): what a
/// browser's push subscription, or a UnifiedPush endpoint, receives. Also the VAPID signature (RFC 8292) that
/// identifies docketd to the push service.
enum WebPush {
    /// Why a subscription's keys cannot be used.
    struct KeyProblem: Error, Equatable, CustomStringConvertible {
        let description: String
    }

    /// The record size docketd writes, and the most a push service must accept (RFC 8030 §7.2: 4096 bytes).
    static let recordSize = 4096
    /// Salt (16), record size (4), key id length (1), key id (65): the header before the ciphertext.
    static let headerSize = 86
    /// The longest plaintext a 4096-byte message holds: the header, the padding delimiter and the tag taken away.
    static let maximumPlaintext = recordSize - headerSize - 1 - 16

    /// A subscription's keys, checked: the user agent's P-256 public key (`p256dh`, 65 bytes uncompressed) and
    /// its authentication secret (`auth`, 16 bytes), each base64url (padding tolerated).
    struct SubscriptionKeys: Sendable {
        let publicKey: P256.KeyAgreement.PublicKey
        let authSecret: [UInt8]

        init(p256dh: String, auth: String) throws(KeyProblem) {
            guard let key = Base64URL.decode(p256dh.trimmingCharacters(in: ["="])), key.count == 65, key.first == 4,
                let publicKey = try? P256.KeyAgreement.PublicKey(x963Representation: key)
            else { throw KeyProblem(description: "keys.p256dh must be an uncompressed P-256 public key (65 bytes, base64url)") }
            guard let secret = Base64URL.decode(auth.trimmingCharacters(in: ["="])), secret.count == 16 else {
                throw KeyProblem(description: "keys.auth must be a 16-byte authentication secret (base64url)")
            }
            self.publicKey = publicKey
            self.authSecret = secret
        }
    }

    /// Encrypts a message for a subscription: one record, `salt ‖ rs ‖ idlen ‖ keyid ‖ ciphertext ‖ tag`, with a new
    /// key pair and salt for every message (both can be given, for tests against published vectors).
    static func encrypt(
        _ plaintext: [UInt8], for keys: SubscriptionKeys, salt givenSalt: [UInt8]? = nil,
        serverKey: P256.KeyAgreement.PrivateKey = P256.KeyAgreement.PrivateKey()
    ) throws -> [UInt8] {
        guard plaintext.count <= maximumPlaintext else {
            throw KeyProblem(description: "a Web Push message holds at most \(maximumPlaintext) bytes")
        }
        let salt = givenSalt ?? (0..<16).map { _ in UInt8.random(in: .min ... .max) }
        let userAgentKey = Array(keys.publicKey.x963Representation)
        let serverPublic = Array(serverKey.publicKey.x963Representation)
        let shared = try serverKey.sharedSecretFromKeyAgreement(with: keys.publicKey)
        // RFC 8291 §3.4: the input keying material mixes the shared secret with the auth secret and both keys.
        let keyInfo = Array("WebPush: info".utf8) + [0] + userAgentKey + serverPublic
        let ikm = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: keys.authSecret, sharedInfo: keyInfo, outputByteCount: 32)
        let cek = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: ikm, salt: salt, info: Array("Content-Encoding: aes128gcm".utf8) + [0], outputByteCount: 16
        )
        let nonce = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: ikm, salt: salt, info: Array("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12
        ).withUnsafeBytes { Array($0) }
        // One record, so it is the last: the delimiter 0x02 and no padding.
        let sealed = try AES.GCM.seal(plaintext + [2], using: cek, nonce: try AES.GCM.Nonce(data: nonce))
        let size = UInt32(recordSize)
        return salt + [UInt8(size >> 24), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF)]
            + [UInt8(serverPublic.count)] + serverPublic + Array(sealed.ciphertext) + Array(sealed.tag)
    }

    /// The `Authorization` header of RFC 8292: `vapid t=<JWT>,k=<public key>`, the JWT (ES256) naming the push
    /// service's origin (`aud`), an expiry within 24 hours (`exp`) and whom to contact (`sub`).
    static func vapidAuthorization(
        endpoint: URL, key: P256.Signing.PrivateKey, subject: String, now: Date = Date(), lifetime: TimeInterval = 12 * 3600
    ) throws -> String {
        guard let scheme = endpoint.scheme?.lowercased(), let host = endpoint.host else {
            throw KeyProblem(description: "the endpoint has no origin")
        }
        var origin = scheme + "://" + host
        if let port = endpoint.port, !(scheme == "https" && port == 443), !(scheme == "http" && port == 80) { origin += ":\(port)" }
        let header = Base64URL.encode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8))
        let claims = "{\"aud\":\(jsonString(origin)),\"exp\":\(Int(now.timeIntervalSince1970 + lifetime)),\"sub\":\(jsonString(subject))}"
        let signingInput = header + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try key.signature(for: Array(signingInput.utf8))
        let token = signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
        // No space after the comma: RFC 8292's auth-params allow one, but py_vapid (behind Mozilla's push service)
        // and pywebpush write and read them without.
        return "vapid t=" + token + ",k=" + Base64URL.encode(Array(key.publicKey.x963Representation))
    }

    private static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            default:
                if scalar.value < 0x20 { out += String(format: "\\u%04x", scalar.value) } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out + "\""
    }
}
