import Crypto
import DocketModel
import Foundation

/// Compass's login tokens: HS512 JWTs with `sub` (the user name), `repo`, `db`, `iat` and `exp` (24 hours), as the
/// vendor's server issues them, plus `sid`, a session of ``SessionStore`` that logoff, a password change or a lock
/// ends on every instance at once. A token is good while its signature, its expiry and its session all hold.
struct CompassTokens: Sendable {
    struct Claims: Sendable, Equatable {
        var user: String
        var repo: String
        var database: String
        var issuedAt: Int
        var expires: Int
        var session: String
    }

    static let lifetime = 86_400

    /// The instance's signing secret (``SigningKey``).
    let secret: [UInt8]
    private var key: SymmetricKey { SymmetricKey(data: secret) }
    let sessions: SessionStore

    /// Issues a token for a verified user and records its session.
    func issue(userID: String, userName: String, repo: String, database: String, now: Int = SessionStore.now()) async throws
        -> String
    {
        let session = Data((0..<24).map { _ in UInt8.random(in: .min ... .max) }).base64URLEncoded
        let claims = Claims(user: userName, repo: repo, database: database, issuedAt: now, expires: now + Self.lifetime, session: session)
        try await sessions.save(session, userID: userID, expires: claims.expires)
        return sign(claims)
    }

    func sign(_ claims: Claims) -> String {
        let header = Data(#"{"alg":"HS512","typ":"JWT"}"#.utf8).base64URLEncoded
        let payload = JSONValue(members: [
            ("sub", .string(claims.user)), ("repo", .string(claims.repo)), ("db", .string(claims.database)),
            ("iat", .integer(claims.issuedAt)), ("exp", .integer(claims.expires)), ("sid", .string(claims.session)),
        ])
        let body = header + "." + Data(payload.serialized()).base64URLEncoded
        let signature = HMAC<SHA512>.authenticationCode(for: Data(body.utf8), using: key)
        return body + "." + Data(signature).base64URLEncoded
    }

    /// The claims and the session's user of a token that holds; nil for anything else (forged, expired, ended).
    func verify(_ token: String, now: Int = SessionStore.now()) async throws -> (claims: Claims, userID: String)? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard token.utf8.count <= 4096, parts.count == 3,
            let header = Data(base64URLEncoded: String(parts[0])),
            let headerJSON = try? JSONValue.parse(header), headerJSON["alg"]?.stringValue == "HS512",
            let signature = Data(base64URLEncoded: String(parts[2])),
            HMAC<SHA512>.isValidAuthenticationCode(signature, authenticating: Data((parts[0] + "." + parts[1]).utf8), using: key),
            let payload = Data(base64URLEncoded: String(parts[1])), let json = try? JSONValue.parse(payload),
            let user = json["sub"]?.stringValue, let repo = json["repo"]?.stringValue,
            let database = json["db"]?.stringValue, let session = json["sid"]?.stringValue,
            let issued = json["iat"]?.intValue, let expires = json["exp"]?.intValue, expires > now
        else { return nil }
        guard let stored = try await sessions.load(session), stored.expires > now else { return nil }
        return (Claims(user: user, repo: repo, database: database, issuedAt: issued, expires: expires, session: session), stored.userID)
    }

    func end(_ claims: Claims) async throws { try await sessions.delete(claims.session) }

    /// A JSON value sealed with the instance's secret (result set handles): readable by every instance, and not
    /// forgeable by clients.
    func seal(_ value: JSONValue) -> String {
        let body = Data(value.serialized()).base64URLEncoded
        let signature = HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: key)
        return body + "." + Data(signature).base64URLEncoded
    }

    /// What ``seal(_:)`` sealed; nil for anything else.
    func unseal(_ text: String) -> JSONValue? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard text.utf8.count <= 16_384, parts.count == 2, let signature = Data(base64URLEncoded: String(parts[1])),
            HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: Data(parts[0].utf8), using: key),
            let body = Data(base64URLEncoded: String(parts[0]))
        else { return nil }
        return try? JSONValue.parse(body)
    }
}

extension Data {
    var base64URLEncoded: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    init?(base64URLEncoded text: String) {
        guard text.utf8.count <= 8192 else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        self.init(base64Encoded: base64)
    }
}
