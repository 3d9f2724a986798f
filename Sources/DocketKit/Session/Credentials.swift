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
    /// A Compass (Traxiem) login to one repository and database: `POST /ccmweb/rest/authenticate` with the
    /// password, then the token it returns as a bearer token (logging in again when it expires).
    case compass(repository: String, database: String, userName: String, password: String)
    /// A Compass token from an earlier login, and no password: it works until it expires (24 hours) or is logged
    /// off, then the user must log in again.
    case compassToken(repository: String, database: String, userName: String, token: String)
    /// An ETO sign-in and the context chosen since (enterprise, site, program), with its tokens and no password:
    /// ``ETOService/signIn(email:password:)`` fills it in; it works until the tokens expire (24 hours).
    case eto(ETOLogin)
    /// A sign-in through an OpenID Connect provider (docketd's own realm, or a company's): a refresh token and no
    /// password. The provider may rotate the refresh token on every use: ``DocketSession`` keeps the newest and
    /// reports it (``DocketSession/init(instance:credentials:transport:retryPolicy:credentialsDidChange:)``) so
    /// that it is saved at once.
    case openID(OpenIDLogin)

    /// The user name these credentials log in as.
    public var userName: String {
        switch self {
        case .basic(let userName, _), .oauth(_, _, let userName, _), .refreshToken(_, _, let userName, _),
            .sessionCookies(let userName, _), .compass(_, _, let userName, _), .compassToken(_, _, let userName, _):
            return userName
        case .eto(let login):
            return login.email
        case .openID(let login):
            return login.userName
        }
    }

    /// Whether these credentials hold a password (which a store then keeps).
    public var containsPassword: Bool {
        switch self {
        case .basic, .oauth, .compass: return true
        case .refreshToken, .sessionCookies, .compassToken, .eto, .openID: return false
        }
    }

    /// Whether this is an ETO login.
    public var isETO: Bool {
        if case .eto = self { return true }
        return false
    }

    /// The Compass repository and database of a Compass login; nil for the ServiceNow APIs.
    public var compassDatabase: (repository: String, database: String)? {
        switch self {
        case .compass(let repository, let database, _, _), .compassToken(let repository, let database, _, _):
            return (repository, database)
        default: return nil
        }
    }

    /// Saved logins without a password, which cannot log in again by themselves.
    var isSaved: Bool { !containsPassword }
}

/// Where an ETO user signed in and chose to work: the SSO token, then the enterprise and site (with the site's
/// security token), then the program. Nothing here is a password.
public struct ETOLogin: Sendable, Equatable, Codable {
    /// The e-mail address the user signed in with.
    public var email: String
    /// The SSO token of ``ETOService/signIn(email:password:)`` ("" before).
    public var ssoToken: String
    /// The chosen enterprise's GUID.
    public var enterprise: String?
    /// The chosen site (ETO's SiteID).
    public var site: Int?
    /// The site's security token, from ``ETOService/selectSite(_:enterprise:utcOffsetMinutes:)``.
    public var siteToken: String?
    /// The chosen program (ETO's ProgramID).
    public var program: Int?

    public init(
        email: String, ssoToken: String = "", enterprise: String? = nil, site: Int? = nil, siteToken: String? = nil,
        program: Int? = nil
    ) {
        self.email = email
        self.ssoToken = ssoToken
        self.enterprise = enterprise
        self.site = site
        self.siteToken = siteToken
        self.program = program
    }
}

/// What an OpenID sign-in keeps: where to refresh and revoke, the client, the user, the newest refresh token.
public struct OpenIDLogin: Sendable, Equatable, Codable {
    public var issuer: String
    public var tokenEndpoint: String
    public var revocationEndpoint: String?
    public var clientID: String
    /// The client's secret, for a confidential client (docketd's `docket-cli` publishes its own: it is no secret).
    public var clientSecret: String?
    public var userName: String
    public var refreshToken: String

    public init(
        issuer: String, tokenEndpoint: String, revocationEndpoint: String? = nil, clientID: String, clientSecret: String? = nil,
        userName: String, refreshToken: String
    ) {
        self.issuer = issuer
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.userName = userName
        self.refreshToken = refreshToken
    }

    /// The login to keep after a sign-in: the provider's endpoints, the client, the user named by the access
    /// token (`preferred_username`, else `sub`) and the refresh token. Throws when the provider gave no refresh
    /// token (there would be nothing to keep).
    public init(tokens: OpenIDTokens, configuration: OpenIDConfiguration, clientID: String, clientSecret: String? = nil) throws {
        guard let refresh = tokens.refreshToken else {
            throw DocketError(kind: .invalidRequest, message: "the provider signed you in but gave no refresh token to keep")
        }
        self.init(
            issuer: configuration.issuer, tokenEndpoint: configuration.tokenEndpoint, revocationEndpoint: configuration.revocationEndpoint,
            clientID: clientID, clientSecret: clientSecret,
            userName: tokens.claim("preferred_username") ?? tokens.claim("sub") ?? "?", refreshToken: refresh
        )
    }
}
