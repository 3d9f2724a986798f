import HTTPTypes
import Hummingbird
import HummingbirdAuth

/// Establishes the caller of every ServiceNow API request (``ServiceNowAPI``): a REST API key (`x-sn-apikey`), HTTP
/// Basic credentials (which
/// also start or refresh a session, returned as the HttpOnly `JSESSIONID` cookie), an OAuth bearer token from `/oauth_token.do`, or
/// the session cookie alone on later requests. Docket's own event stream (`/api/docket/`) also takes a Compass login
/// token as the bearer, so that Compass clients follow changes without a second login. Anything else is a 401 in ServiceNow's words. A request that
/// already has a caller (a Batch API sub-request) keeps it. `X-UserToken` is accepted and ignored: sessions
/// here come from Basic logins, never from a browser form, so there is no CSRF token to check.
struct AuthMiddleware: RouterMiddleware {
    typealias Context = DocketRequestContext
    static let cookieName = Identity.sessionCookieName
    /// ServiceNow's header for a REST API key.
    static let apiKeyHeader = HTTPField.Name("x-sn-apikey")!

    let identity: Identity
    /// Whether the server speaks TLS (the cookie is then marked `Secure`).
    var secure = false

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard context.caller == nil else { return try await next(request, context) }
        var context = context
        let presented = request.cookies[Self.cookieName]?.value
        var issue: String? = nil
        do {
            if identity.certificates != nil, let fingerprint = try await Self.certificate(context),
                let caller = try await identity.certificate(fingerprint)
            {
                // A registered client certificate signs in by itself, whatever else the request carries (clients
                // that present one may still send an empty Basic header).
                context.caller = caller
                context.credential = .certificate(fingerprint)
            } else if let key = request.headers[Self.apiKeyHeader] {
                // A REST API key stands for its user alone (no session is started).
                context.caller = try await identity.apiKey(key)
                context.credential = .apiKey(key)
            } else if let basic = request.headers.basic {
                let (caller, token) = try await identity.login(
                    userName: basic.username, password: basic.password, address: context.clientAddress,
                    client: Self.client(request, context: context)
                )
                context.caller = caller
                context.credential = .session(token)
                if token != presented { issue = token }
            } else if let bearer = request.headers.bearer {
                // Like ServiceNow, a bearer request also gets a session: clients that keep cookies (pysnc's
                // refresh path sends one request without the new token) stay signed in through it. Below
                // `/api/docket/` a Compass login token is taken too.
                let (caller, credential, session) = try await identity.bearer(
                    bearer.token,
                    options: .init(
                        session: (presented, Self.client(request, context: context)),
                        compassTokens: request.uri.path.hasPrefix("/api/docket/")
                    )
                )
                context.caller = caller
                context.credential = credential
                if case .bearer = credential { issue = session }
            } else if request.headers[.authorization] != nil {
                throw Identity.Refusal.missing
            } else if let presented {
                context.caller = try await identity.session(presented)
                context.credential = .session(presented)
            } else {
                throw Identity.Refusal.missing
            }
        } catch let refusal as Identity.Refusal {
            if refusal == .unavailable {
                context.logger.warning("Credentials could not be checked: the database is unavailable", metadata: ["path": "\(request.uri.path)"])
            }
            throw ServiceNowError(refusal)
        }
        var response = try await next(request, context)
        if let issue {
            response.setCookie(Cookie(name: Self.cookieName, value: issue, path: "/", secure: secure, httpOnly: true, sameSite: .lax))
        }
        return response
    }

    /// The fingerprint of the client certificate the connection presented, when docketd asks for them
    /// (`--tls-client-ca`); nil otherwise.
    static func certificate(_ context: Context) async throws(Identity.Refusal) -> String? {
        do {
            guard let certificate = try await ClientCertificates.presented(on: context.channel) else { return nil }
            return try ClientCertificates.fingerprint(certificate)
        } catch {
            throw .unavailable
        }
    }

    /// Which client of a user a request comes from, for its session: its address and `User-Agent`.
    static func client(_ request: Request, context: Context) -> String {
        context.clientAddress + "\u{0}" + String((request.headers[.userAgent] ?? "").prefix(256))
    }
}
