/// How a client proves who it is.
public enum Credentials: Sendable, Equatable, Codable {
    /// HTTP Basic on the first request, then the instance's session cookies.
    case basic(userName: String, password: String)
    /// OAuth 2.0 resource-owner password grant at `/oauth_token.do`, with refresh.
    case oauth(clientID: String, clientSecret: String, userName: String, password: String)

    /// The user name these credentials log in as.
    public var userName: String {
        switch self {
        case .basic(let userName, _), .oauth(_, _, let userName, _): return userName
        }
    }
}
