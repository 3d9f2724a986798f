import Crypto
import DocketModel
import Foundation
import JWTKit

/// Compass's login tokens: HS512 JWTs (jwt-kit, under ``TokenKeys``' current key, named by `kid`) with `sub` (the user name), `repo`, `db`, `iat` and `exp` (24 hours), as the
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

    /// The token's payload as it is written.
    struct Payload: JWTPayload {
        var sub: String
        var repo: String
        var db: String
        var iat: Int
        var exp: Int
        var sid: String

        /// Checked by ``CompassTokens/verify(_:now:)`` against its clock: the expiry, then the session in storage.
        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    static let lifetime = 86_400

    /// The instance's token keys (``TokenKeys``).
    let keys: TokenKeys
    private var key: SymmetricKey { SymmetricKey(data: keys.secret) }
    let sessions: SessionStore

    /// Issues a token for a verified user and records its session; nil when `proof` (by default: that the user may
    /// still sign in) no longer holds.
    func issue(
        userID: String, userName: String, repo: String, database: String, proof: UserDirectory.CredentialProof? = nil,
        now: Int = SessionStore.now()
    ) async throws -> String? {
        let session = Base64URL.random(bytes: 24)
        let claims = Claims(user: userName, repo: repo, database: database, issuedAt: now, expires: now + Self.lifetime, session: session)
        guard try await sessions.save(session, userID: userID, expires: claims.expires, proof: proof ?? .init(userID: userID)) else {
            return nil
        }
        return try await sign(claims)
    }

    /// An HS512 JWT of the claims, under the current key (its id in the header).
    func sign(_ claims: Claims) async throws -> String {
        try await keys.sign(
            Payload(sub: claims.user, repo: claims.repo, db: claims.database, iat: claims.issuedAt, exp: claims.expires, sid: claims.session),
            now: claims.issuedAt
        )
    }

    /// The claims and the session's user of a token that holds; nil for anything else (forged, expired, ended).
    func verify(_ token: String, now: Int = SessionStore.now()) async throws -> (claims: Claims, userID: String)? {
        guard token.utf8.count <= 4096, let payload = try await keys.verify(token, as: Payload.self, now: now), payload.exp > now else {
            return nil
        }
        guard let stored = try await sessions.load(payload.sid), stored.expires > now else { return nil }
        let claims = Claims(
            user: payload.sub, repo: payload.repo, database: payload.db, issuedAt: payload.iat, expires: payload.exp,
            session: payload.sid
        )
        return (claims, stored.userID)
    }

    func end(_ claims: Claims) async throws { try await sessions.delete(claims.session) }

    /// A JSON value sealed with the instance's secret (result set handles): readable by every instance, and not
    /// forgeable by clients.
    func seal(_ value: JSONValue) -> String {
        let body = Base64URL.encode(value.serialized())
        let signature = HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: key)
        return body + "." + Base64URL.encode(Array(signature))
    }

    /// What ``seal(_:)`` sealed; nil for anything else.
    func unseal(_ text: String) -> JSONValue? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard text.utf8.count <= 16_384, parts.count == 2, let signature = Base64URL.decode(parts[1]),
            HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: Data(parts[0].utf8), using: key),
            let body = Base64URL.decode(parts[0])
        else { return nil }
        return try? JSONValue.parse(body)
    }
}
