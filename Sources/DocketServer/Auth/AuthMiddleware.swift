import Hummingbird
import HummingbirdAuth

/// Establishes the caller of every ServiceNow API request (``ServiceNowAPI``): HTTP Basic credentials (which
/// also start or refresh a session, returned as the HttpOnly `JSESSIONID` cookie), an OAuth bearer token from `/oauth_token.do`, or
/// the session cookie alone on later requests. Anything else is a 401 in ServiceNow's words. A request that
/// already has a caller (a Batch API sub-request) keeps it. `X-UserToken` is accepted and ignored: sessions
/// here come from Basic logins, never from a browser form, so there is no CSRF token to check.
struct AuthMiddleware: RouterMiddleware {
    typealias Context = DocketRequestContext
    static let cookieName = "JSESSIONID"

    let authenticator: Authenticator
    let oauth: OAuthService
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
                    userName: basic.username, password: basic.password, address: context.clientAddress
                )
                context.caller = caller
                context.credential = .session(token)
                if token != presented { issue = token }
            } else if let bearer = request.headers.bearer {
                // Like ServiceNow, a bearer request also gets a session: clients that keep cookies (pysnc's
                // refresh path sends one request without the new token) stay signed in through it.
                guard let userID = await oauth.userID(accessToken: bearer.token) else {
                    throw ServiceNowError.unauthenticated
                }
                let (caller, session) = try await authenticator.bearerLogin(userID: userID, presentedSession: presented)
                context.caller = caller
                context.credential = .bearer(bearer.token)
                issue = session
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
                context.logger.error("User store unavailable during authentication", metadata: ["path": "\(request.uri.path)"])
            }
            throw ServiceNowError(failure)
        }
        var response = try await next(request, context)
        if let issue {
            response.setCookie(Cookie(name: Self.cookieName, value: issue, path: "/", secure: secure, httpOnly: true, sameSite: .lax))
        }
        return response
    }
}
