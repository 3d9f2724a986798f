import Crypto
import Foundation

/// The keys of a Web Push or UnifiedPush subscription made by a client that is not a browser (a desktop with a
/// UnifiedPush distributor, the `docket` command): the P-256 key pair and authentication secret of RFC 8291, and
/// the decryption of what arrives (one `aes128gcm` record, as docketd sends).
///
/// ```swift
/// let keys = WebPushKeys.generate()
/// try await client.notifications.register(.unifiedPush(endpoint: url, p256dh: keys.p256dh, auth: keys.auth))
/// // … when the distributor hands a message over:
/// let json = try keys.decrypt(body)
/// ```
public struct WebPushKeys: Sendable, Codable, Equatable {
    /// The private key (32 bytes, base64url): keep it as secret as a password.
    public var privateKey: String
    /// The public key (65 bytes uncompressed, base64url), the subscription's `p256dh`.
    public var p256dh: String
    /// The authentication secret (16 bytes, base64url), the subscription's `auth`.
    public var auth: String

    public init(privateKey: String, p256dh: String, auth: String) {
        self.privateKey = privateKey
        self.p256dh = p256dh
        self.auth = auth
    }

    /// New keys.
    public static func generate() -> WebPushKeys {
        let key = P256.KeyAgreement.PrivateKey()
        var secret = [UInt8](repeating: 0, count: 16)
        for index in secret.indices { secret[index] = UInt8.random(in: .min ... .max) }
        return WebPushKeys(
            privateKey: Self.encode(Array(key.rawRepresentation)), p256dh: Self.encode(Array(key.publicKey.x963Representation)),
            auth: Self.encode(secret)
        )
    }

    /// The plaintext of a message encrypted for these keys (RFC 8291 `aes128gcm`, one record).
    public func decrypt(_ body: Data) throws -> Data {
        let bytes = Array(body)
        func fail(_ why: String) -> DocketError { DocketError(kind: .decoding, message: "the push message cannot be read: \(why)") }
        guard let privateBytes = Self.decode(privateKey), let secret = Self.decode(auth),
            let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: privateBytes)
        else { throw fail("these keys are not a P-256 key pair and a secret") }
        guard bytes.count > 21 else { throw fail("it is shorter than its header") }
        let salt = Array(bytes[0..<16])
        let size = bytes[16..<20].reduce(0) { $0 << 8 | Int($1) }
        let idLength = Int(bytes[20])
        guard idLength == 65, bytes.count > 21 + idLength + 16, size >= 18 else { throw fail("its header is not one docketd writes") }
        let senderBytes = Array(bytes[21..<(21 + idLength)])
        let record = Array(bytes[(21 + idLength)...])
        guard record.count <= size else { throw fail("it has more than one record") }
        guard let sender = try? P256.KeyAgreement.PublicKey(x963Representation: senderBytes) else { throw fail("its sender key is not a P-256 key") }
        let shared = try key.sharedSecretFromKeyAgreement(with: sender)
        let keyInfo = Array("WebPush: info".utf8) + [0] + Array(key.publicKey.x963Representation) + senderBytes
        let ikm = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: secret, sharedInfo: keyInfo, outputByteCount: 32)
        let cek = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: Array("Content-Encoding: aes128gcm".utf8) + [0], outputByteCount: 16)
        let nonce = HKDF<SHA256>.deriveKey(inputKeyMaterial: ikm, salt: salt, info: Array("Content-Encoding: nonce".utf8) + [0], outputByteCount: 12)
            .withUnsafeBytes { Array($0) }
        let opened: Data
        do {
            let box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: nonce), ciphertext: record.dropLast(16), tag: record.suffix(16))
            opened = try AES.GCM.open(box, using: cek)
        } catch {
            throw fail("it was not encrypted for these keys")
        }
        // The last (only) record ends with the delimiter 2, then padding zeros.
        var plain = Array(opened)
        while plain.last == 0 { plain.removeLast() }
        guard plain.last == 2 else { throw fail("its padding is not a last record's") }
        plain.removeLast()
        return Data(plain)
    }

    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ text: String) -> [UInt8]? {
        var base = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/").replacingOccurrences(of: "=", with: "")
        base += String(repeating: "=", count: (4 - base.count % 4) % 4)
        return Data(base64Encoded: base).map(Array.init)
    }
}
