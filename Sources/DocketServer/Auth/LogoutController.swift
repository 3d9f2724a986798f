import Hummingbird

/// `/logout.do`, as on an instance: ends the session named by the `JSESSIONID` cookie and clears the cookie.
/// Needs no authentication (an unknown or expired session is simply gone) and answers 200 either way.
struct LogoutController {
    typealias Context = DocketRequestContext

    let authenticator: Authenticator

    func add(to router: Router<Context>) {
        router.get("/logout.do", use: logout)
        router.post("/logout.do", use: logout)
    }

    @Sendable func logout(_ request: Request, context: Context) async throws -> Response {
        if let token = request.cookies[AuthMiddleware.cookieName]?.value, !token.isEmpty {
            do {
                try await authenticator.endSession(token)
            } catch {
                // Not recorded: the session still works, so the logout is not reported as done.
                return Response(
                    status: .serviceUnavailable,
                    headers: [.contentType: "text/plain; charset=utf-8", .cacheControl: "no-store", .retryAfter: StorageUnavailable.retryAfter],
                    body: .init(byteBuffer: .init(string: "The logout could not be recorded; try again.\n"))
                )
            }
        }
        var response = Response(
            status: .ok, headers: [.contentType: "text/plain; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: .init(string: "Logged out.\n"))
        )
        response.setCookie(Cookie(name: AuthMiddleware.cookieName, value: "", maxAge: 0, path: "/", httpOnly: true, sameSite: .lax))
        return response
    }
}
