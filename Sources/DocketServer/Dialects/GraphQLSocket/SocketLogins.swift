import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdAuth
import Synchronization

/// How a GraphQL socket is authenticated, in both dialects that offer one.
///
/// - `connection_init`'s payload, when it carries `Authorization`, `authorization`, `Auth` or `auth` (what the
///   showcase clients send: `{"Authorization": "Bearer …"}`), or the same inside `headers` (`{"headers":
///   {"Authorization": …}}`, as some clients wrap it);
/// - else the upgrade request's `Authorization` header;
/// - else, where the dialect takes sessions, the session cookie — only from a page of this server (an `Origin`
///   naming another site is refused: a browser would send the cookie with any site's WebSocket).
///
/// Bearer tokens are docketd's OAuth tokens; Basic credentials log in (throttled like every login).
struct SocketLogins: Sendable {
    let identity: Identity
    let acceptsSessionCookie: Bool

    static let payloadKeys = ["Authorization", "authorization", "Auth", "auth"]

    func authenticate(payload: JSONValue?, request: Request, clientAddress: String) async -> SocketLogin {
        var authorization: String?
        if let members = payload?.objectValue {
            let places = [members] + [members["headers"]?.objectValue].compactMap { $0 }
            authorization = places.lazy.compactMap { place in Self.payloadKeys.lazy.compactMap { place[$0]?.stringValue }.first }.first
        }
        authorization = authorization ?? request.headers[.authorization]
        do {
            if let authorization {
                var fields = HTTPFields()
                fields[.authorization] = authorization
                if let bearer = fields.bearer {
                    let (caller, credential, _) = try await identity.bearer(bearer.token)
                    return .accepted(caller, credential)
                }
                if let basic = fields.basic {
                    let (caller, token) = try await identity.login(
                        userName: basic.username, password: basic.password, address: clientAddress,
                        client: clientAddress + "\u{0}" + String((request.headers[.userAgent] ?? "").prefix(256))
                    )
                    return .accepted(caller, .session(token))
                }
                return .rejected("Authorization must be 'Bearer <token>' or 'Basic <credentials>'")
            }
            if acceptsSessionCookie, let token = request.cookies[AuthMiddleware.cookieName]?.value, Self.isSameOrigin(request) {
                return .accepted(try await identity.session(token), .session(token))
            }
            return .rejected("Authentication required: send Authorization in connection_init's payload or the upgrade request")
        } catch {
            switch error {
            case .missing: return .rejected("Authentication required")
            case .invalidToken: return .rejected("The bearer token is not valid (unknown, expired or revoked)")
            case .sessionEnded: return .rejected("The session has ended; log in again")
            case .rejected: return .rejected("User name or password invalid")
            case .throttled: return .rejected("Too many failed login attempts; try again later")
            case .busy, .unavailable: return .unavailable("Logins cannot be checked right now; try again")
            }
        }
    }

    /// Whether the upgrade comes from a page of this server's host (or from a client that is not a browser). Ports
    /// are not compared: cookies are not bound to ports either.
    static func isSameOrigin(_ request: Request) -> Bool {
        guard let origin = request.headers[.origin] else { return true }
        guard let authority = request.head.authority, let originHost = URL(string: origin)?.host?.lowercased(),
            let host = URL(string: "http://" + authority)?.host?.lowercased()
        else { return false }
        return originHost == host
    }
}
