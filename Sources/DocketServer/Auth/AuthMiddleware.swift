import Hummingbird
import HummingbirdAuth

/// Establishes the caller of every ServiceNow API request (``ServiceNowAPI``): HTTP Basic credentials (which
/// also start or refresh a session, returned as the HttpOnly `JSESSIONID` cookie), an OAuth bearer token from `/oauth_token.do`, or
/// the session cookie alone on later requests. Docket's own event stream (`/api/docket/`) also takes a Compass login
/// token as the bearer, so that Compass clients follow changes without a second login. Anything else is a 401 in ServiceNow's words. A request that
/// already has a caller (a Batch API sub-request) keeps it. `X-UserToken` is accepted and ignored: sessions
/// here come from Basic logins, never from a browser form, so there is no CSRF token to check.
struct AuthMiddleware: RouterMiddleware {
    typealias Context = DocketRequestContext
    static let cookieName = "JSESSIONID"

    let authenticator: Authenticator
    let oauth: OAuthService
    /// Compass login tokens, accepted below `/api/docket/` only.
    var compass: CompassTokens? = nil
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
            if let basic = request.headers.basic {
                let (caller, token) = try await authenticator.login(
                    userName: basic.username, password: basic.password, address: context.clientAddress,
                    client: Self.client(request, context: context)
                )
                context.caller = caller
                context.credential = .session(token)
                if token != presented { issue = token }
            } else if let bearer = request.headers.bearer {
                // Like ServiceNow, a bearer request also gets a session: clients that keep cookies (pysnc's
                // refresh path sends one request without the new token) stay signed in through it.
                if let userID = try await oauth.userID(accessToken: bearer.token) {
                    let (caller, session) = try await authenticator.bearerLogin(
                        userID: userID, presentedSession: presented, client: Self.client(request, context: context)
                    )
                    context.caller = caller
                    context.credential = .bearer(bearer.token)
                    issue = session
                } else if let compass, request.uri.path.hasPrefix("/api/docket/"), let caller = try await Self.compassCaller(
                    bearer.token, compass: compass, authenticator: authenticator
                ) {
                    context.caller = caller
                    context.credential = .compass(bearer.token)
                } else {
                    throw ServiceNowError.unauthenticated
                }
            } else if request.headers[.authorization] != nil {
                throw ServiceNowError.unauthenticated
            } else if let presented, let caller = try await authenticator.caller(sessionToken: presented) {
                context.caller = caller
                context.credential = .session(presented)
            } else {
                throw ServiceNowError.unauthenticated
            }
        } catch let failure as LoginFailure {
            await failure.holdBack(authenticator)
            if failure == .unavailable {
                context.logger.warning("Credentials could not be checked: the database is unavailable", metadata: ["path": "\(request.uri.path)"])
            }
            throw ServiceNowError(failure)
        }
        var response = try await next(request, context)
        if let issue {
            response.setCookie(Cookie(name: Self.cookieName, value: issue, path: "/", secure: secure, httpOnly: true, sameSite: .lax))
        }
        return response
    }

    /// Which client of a user a request comes from, for its session: its address and `User-Agent`.
    static func client(_ request: Request, context: Context) -> String {
        context.clientAddress + "\u{0}" + String((request.headers[.userAgent] ?? "").prefix(256))
    }

    /// The caller of a Compass login token; nil for a token that does not hold.
    static func compassCaller(_ token: String, compass: CompassTokens, authenticator: Authenticator) async throws(LoginFailure)
        -> Caller?
    {
        let verified: (claims: CompassTokens.Claims, userID: String)?
        do { verified = try await compass.verify(token) } catch { throw .unavailable }
        guard let verified else { return nil }
        return try await authenticator.caller(userID: verified.userID)
    }
}
