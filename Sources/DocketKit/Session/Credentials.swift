/// How a client proves who it is.
public enum Credentials: Sendable, Equatable, Codable {
    /// HTTP Basic on the first request, then the instance's session cookies.
    case basic(userName: String, password: String)
    /// OAuth 2.0 resource-owner password grant at `/oauth_token.do`, with refresh.
    case oauth(clientID: String, clientSecret: String, userName: String, password: String)
    /// An OAuth refresh token from an earlier login, and no password: access tokens come from the
    /// `refresh_token` grant until the refresh token expires, then the user must log in again.
    case refreshToken(clientID: String, clientSecret: String, userName: String, refreshToken: String)
    /// Session cookies from an earlier login, and no password: they work until the session ends, then the user
    /// must log in again.
    case sessionCookies(userName: String, cookies: [String: String])

    /// The user name these credentials log in as.
    public var userName: String {
        switch self {
        case .basic(let userName, _), .oauth(_, _, let userName, _), .refreshToken(_, _, let userName, _),
            .sessionCookies(let userName, _):
            return userName
        }
    }

    /// Whether these credentials hold a password (which a store then keeps).
    public var containsPassword: Bool {
        switch self {
        case .basic, .oauth: return true
        case .refreshToken, .sessionCookies: return false
        }
    }

    /// Saved logins without a password, which cannot log in again by themselves.
    var isSaved: Bool { !containsPassword }
}
