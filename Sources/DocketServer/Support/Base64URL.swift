import ExtrasBase64

/// Base64url without padding (RFC 4648 §5), as tokens, handles and CSRF values are written: ExtrasBase64's coder.
enum Base64URL {
    /// The longest text ``decode(_:)`` reads.
    static let maxLength = 16_384

    static func encode(_ bytes: some Collection<UInt8>) -> String {
        Base64.encodeToString(bytes: bytes, options: [.base64UrlAlphabet, .omitPaddingCharacter])
    }

    /// The bytes of base64url text; nil when it is not base64url or is longer than ``maxLength``.
    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        guard text.utf8.count <= maxLength else { return nil }
        do {
            return try Base64.decode(bytes: Array(text.utf8), options: [.base64UrlAlphabet, .omitPaddingCharacter])
        } catch {
            // Not base64url: the caller treats it as any other malformed token.
            return nil
        }
    }

    /// `count` random bytes as base64url: new session ids and opaque tokens.
    static func random(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return encode((0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }
}
