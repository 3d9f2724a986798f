import Hummingbird
import HummingbirdAuth

/// Establishes the caller of every `/api` request: HTTP Basic credentials (which also start or refresh a
/// session, returned as the HttpOnly `JSESSIONID` cookie), or that cookie alone on later requests.
/// Anything else is a 401 in ServiceNow's words.
struct AuthMiddleware: RouterMiddleware {
    typealias Context = DocketRequestContext
    static let cookieName = "JSESSIONID"

    let authenticator: Authenticator

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard request.uri.path.hasPrefix("/api/") else { return try await next(request, context) }
        var context = context
        let presented = request.cookies[Self.cookieName]?.value
        var issue: String? = nil
        if let basic = request.headers.basic {
            guard let (caller, token) = await authenticator.login(userName: basic.username, password: basic.password)
            else { throw ServiceNowError.unauthenticated }
            context.caller = caller
            if token != presented { issue = token }
        } else if request.headers[.authorization] != nil {
            throw ServiceNowError.unauthenticated
        } else if let presented, let caller = await authenticator.caller(sessionToken: presented) {
            context.caller = caller
        } else {
            throw ServiceNowError.unauthenticated
        }
        var response = try await next(request, context)
        if let issue {
            response.setCookie(Cookie(name: Self.cookieName, value: issue, path: "/", httpOnly: true, sameSite: .lax))
        }
        return response
    }
}
