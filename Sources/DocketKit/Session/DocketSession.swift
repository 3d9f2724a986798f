import DocketModel
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An authenticated conversation with one instance: it holds the credentials, the session cookies and OAuth
/// tokens, and sends every request of a ``DocketClient``.
///
/// With ``Credentials/basic(userName:password:)`` the first request carries Basic credentials and later ones
/// only the session cookies the instance set, as ServiceNow's own example apps do. A 401 makes it log in
/// again once and retry. A 429 waits for `Retry-After` (with jitter, at most ``RetryPolicy/maximumDelay``)
/// and retries up to ``RetryPolicy/maximumRetries`` times.
public actor DocketSession {
    /// How rate-limited requests are retried.
    public struct RetryPolicy: Sendable {
        /// Retries of one request after 429 answers.
        public var maximumRetries: Int
        /// The longest wait before a retry, whatever `Retry-After` says.
        public var maximumDelay: Duration

        /// Creates a policy.
        public init(maximumRetries: Int = 3, maximumDelay: Duration = .seconds(30)) {
            self.maximumRetries = maximumRetries
            self.maximumDelay = maximumDelay
        }
    }

    struct OAuthToken: Sendable {
        var accessToken: String
        var refreshToken: String?
        var expires: Date
    }

    /// The instance this session talks to.
    public nonisolated let instance: Instance
    /// The credentials it logs in with.
    public nonisolated let credentials: Credentials
    private let transport: any Transport
    private let retryPolicy: RetryPolicy
    /// The cookies the instance set, with when each expires (`Expires` or `Max-Age`; nil: with the session).
    private var jar: [String: (value: String, expires: Date?)] = [:]
    /// The cookies still in force: one whose expiry has passed is not sent (nor saved).
    private var cookies: [String: String] {
        get {
            let now = Date()
            return jar.compactMapValues { cookie in cookie.expires.map { $0 > now } ?? true ? cookie.value : nil }
        }
        set { jar = newValue.mapValues { ($0, nil) } }
    }
    private var token: OAuthToken?
    private var compassToken: String?
    private var eto: ETOLogin?
    /// The OpenID sign-in as it stands (its refresh token rotates).
    private var openID: OpenIDLogin?
    /// The refresh in flight: however many requests need a fresh token, one refresh serves them (a rotated refresh
    /// token used twice would end the sign-in).
    private var refreshing: Task<String, any Error>?
    /// Told the credentials to save whenever they change (a rotated refresh token).
    private let credentialsDidChange: (@Sendable (Credentials) -> Void)?

    /// Creates a session; nothing is sent until the first request.
    public init(
        instance: Instance, credentials: Credentials, transport: any Transport = URLSessionTransport(),
        retryPolicy: RetryPolicy = RetryPolicy(), credentialsDidChange: (@Sendable (Credentials) -> Void)? = nil
    ) {
        self.instance = instance
        self.credentials = credentials
        self.transport = transport
        self.retryPolicy = retryPolicy
        self.credentialsDidChange = credentialsDidChange
        if case .openID(let saved) = credentials { openID = saved }
        if case .sessionCookies(_, let saved) = credentials { jar = saved.mapValues { ($0, nil) } }
        if case .compassToken(_, _, _, let saved) = credentials { compassToken = saved }
        if case .eto(let saved) = credentials { eto = saved }
    }

    /// The ETO sign-in and context as they stand, to save (``Credentials/eto(_:)``).
    public var etoLogin: ETOLogin? { eto }

    /// Replaces the ETO context (``ETOService`` does, as the user signs in and chooses).
    func setETO(_ login: ETOLogin) { eto = login }

    /// The OpenID sign-in as it stands, with the newest refresh token, to save (``Credentials/openID(_:)``).
    public var openIDLogin: OpenIDLogin? { openID }

    /// The token of the last Compass login, to save instead of a password
    /// (``Credentials/compassToken(repository:database:userName:token:)``).
    public var compassLoginToken: String? { compassToken }

    /// Whether the session holds cookies from the instance (after a successful Basic login).
    public var hasSessionCookies: Bool { !cookies.isEmpty }

    /// The cookies the instance set, to save instead of a password (``Credentials/sessionCookies(userName:cookies:)``).
    public var sessionCookies: [String: String] { cookies }

    /// The refresh token of the last OAuth grant, to save instead of a password
    /// (``Credentials/refreshToken(clientID:clientSecret:userName:refreshToken:)``).
    public var refreshToken: String? {
        if let refresh = token?.refreshToken { return refresh }
        if case .refreshToken(_, _, _, let refresh) = credentials { return refresh }
        return openID?.refreshToken
    }

    /// What ``logout()`` achieved on the instance.
    public enum LogoutOutcome: Sendable, Equatable {
        /// The instance ended the login (or there was nothing to end: a password login).
        case ended
        /// The instance could not be asked or refused: the login may stay valid there until it expires.
        case notConfirmed(String)
    }

    /// Ends the login on the instance: revokes the OpenID or OAuth refresh token (and with it the access tokens),
    /// logs off Compass, or ends the session at `/logout.do`. Local state is dropped whatever the instance answers;
    /// the outcome says whether the instance confirmed the end.
    @discardableResult
    public func logout() async -> LogoutOutcome {
        defer {
            cookies = [:]
            token = nil
            compassToken = nil
        }
        var failures: [String] = []
        let transport = self.transport
        /// Why a request did not end what it should have, or nil when it did.
        @Sendable func attempt(_ what: String, _ request: HTTPRequestData) async -> String? {
            do {
                let response = try await transport.send(request)
                return (200..<300).contains(response.status) ? nil : "\(what) answered \(response.status)"
            } catch {
                return "\(what) could not be reached (\(error.localizedDescription))"
            }
        }
        if let compassToken {
            // Compass: logoff ends the token on the server.
            if let failure = await attempt("Compass's logoff", HTTPRequestData(
                method: "POST", url: instance.url("/ccmweb/rest/authenticate/logoff"),
                headers: ["Authorization": "Bearer " + compassToken], body: nil
            )) { failures.append(failure) }
        }
        if let openID {
            // Revoking the refresh token ends the sign-in, its access tokens with it.
            if let endpoint = openID.revocationEndpoint.flatMap(URL.init(string:)) {
                do {
                    try await OpenIDClient(transport: transport).revoke(
                        endpoint: endpoint, token: openID.refreshToken, clientID: openID.clientID, clientSecret: openID.clientSecret
                    )
                } catch {
                    failures.append("the revocation endpoint refused or could not be reached (\(error.localizedDescription))")
                }
            } else {
                failures.append("the provider has no revocation endpoint")
            }
        } else if let refresh = refreshToken {
            if let failure = await attempt("the token revocation", HTTPRequestData(
                method: "POST", url: instance.url("/oauth_revoke_token.do"),
                headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Data(("token=" + Instance.encode(refresh)).utf8)
            )) { failures.append(failure) }
        }
        if !cookies.isEmpty {
            let cookie = cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")
            // /logout.do answers with a redirect to the sign-in page: any answer below 400 ended the session.
            do {
                let response = try await transport.send(
                    HTTPRequestData(method: "POST", url: instance.url("/logout.do"), headers: ["Cookie": cookie], body: nil)
                )
                if response.status >= 400 { failures.append("/logout.do answered \(response.status)") }
            } catch {
                failures.append("/logout.do could not be reached (\(error.localizedDescription))")
            }
        }
        return failures.isEmpty ? .ended : .notConfirmed(failures.joined(separator: "; "))
    }

    /// Sends a request to a path of the instance; returns the response when its status is 2xx and throws
    /// ``DocketError`` otherwise.
    public func send(
        _ method: String, _ path: String, query: [(String, String)] = [], body: Data? = nil, headers: [String: String] = [:]
    ) async throws -> HTTPResponseData {
        try await send(method, url: instance.url(path, query: query), body: body, headers: headers)
    }

    /// Sends a request to an absolute URL on the instance (a `Link` header's, for instance). `headers` are added
    /// (`If-Match`, `Idempotency-Key`); credentials are the session's own.
    public func send(_ method: String, url: URL, body: Data? = nil, headers: [String: String] = [:]) async throws -> HTTPResponseData {
        guard url.host == instance.baseURL.host, url.port == instance.baseURL.port else {
            throw DocketError(kind: .invalidRequest, message: "refusing to send credentials to \(url.host ?? "?")")
        }
        var request = HTTPRequestData(method: method, url: url, headers: ["Accept": "application/json"], body: body)
        if body != nil { request.headers["Content-Type"] = "application/json" }
        for (name, value) in headers where name.lowercased() != "authorization" && name.lowercased() != "cookie" {
            request.headers[name] = value
        }
        var loggedInAgain = false
        var retries = 0
        while true {
            let usedCookies = try await authorize(&request, fresh: loggedInAgain)
            let response: HTTPResponseData
            do {
                response = try await transport.send(request)
            } catch let error as DocketError {
                throw error
            } catch {
                throw DocketError.transport(error, request: request)
            }
            keepCookies(from: response)
            if (200..<300).contains(response.status) { return response }
            try await prepareRetry(
                after: response, request: request, usedCookies: usedCookies, loggedInAgain: &loggedInAgain, retries: &retries
            )
        }
    }

    /// Opens a streamed `GET` (a live event stream) on a path, with the same credentials, logging in again and
    /// 429 handling as ``send(_:_:query:body:)``. Needs a ``StreamingTransport``.
    public func stream(
        _ path: String, query: [(String, String)] = [], headers: [String: String] = [:]
    ) async throws -> StreamingResponse {
        guard let streaming = transport as? any StreamingTransport else {
            throw DocketError(kind: .invalidRequest, message: "this session's transport cannot stream responses")
        }
        var request = HTTPRequestData(method: "GET", url: instance.url(path, query: query), headers: headers)
        var loggedInAgain = false
        var retries = 0
        while true {
            let usedCookies = try await authorize(&request, fresh: loggedInAgain)
            let response: StreamingResponse
            do {
                response = try await streaming.stream(request)
            } catch {
                throw DocketError.transport(error, request: request)
            }
            keepCookies(from: response.head)
            if (200..<300).contains(response.head.status) { return response }
            // An error's body is short: read it (bounded) for the message.
            var full = response.head
            do {
                for try await chunk in response.chunks {
                    full.body.append(chunk)
                    if full.body.count > 65_536 { break }
                }
            } catch {}
            try await prepareRetry(
                after: full, request: request, usedCookies: usedCookies, loggedInAgain: &loggedInAgain, retries: &retries
            )
        }
    }

    /// Decides what follows a non-2xx answer: returns to retry (after logging in again on a 401, once, or
    /// waiting out a 429), or throws the ``DocketError`` the caller gets.
    private func prepareRetry(
        after response: HTTPResponseData, request: HTTPRequestData, usedCookies: Bool, loggedInAgain: inout Bool,
        retries: inout Int
    ) async throws {
        switch response.status {
        case 401 where !loggedInAgain && (token != nil || (!credentials.isSaved && (usedCookies || compassToken != nil))):
            // The session or token expired: log in again (or refresh), once.
            cookies = [:]
            compassToken = nil
            token = token.map { OAuthToken(accessToken: "", refreshToken: $0.refreshToken, expires: .distantPast) }
            loggedInAgain = true
        case 401 where credentials.isSaved:
            throw DocketError(
                kind: .loginExpired, status: 401, message: "the saved login has expired or was ended: log in again",
                request: "\(request.method) \(request.url.absoluteString)"
            )
        case 429 where retries < retryPolicy.maximumRetries:
            retries += 1
            try await Task.sleep(for: delay(after: response, attempt: retries))
        default:
            throw DocketError.http(response, request: request)
        }
    }

    /// Forgets the session and access token, so that the next request logs in again (after a live stream was
    /// told its session ended).
    func dropLogin() {
        cookies = [:]
        if !credentials.isSaved { compassToken = nil }
        token = token.map { OAuthToken(accessToken: "", refreshToken: $0.refreshToken, expires: .distantPast) }
    }

    /// What a WebSocket presents: the `Authorization` value for `connection_init`'s payload (Basic credentials or
    /// a bearer token), or the session cookies as upgrade headers.
    func socketCredentials() async throws -> (authorization: String?, headers: [String: String]) {
        var request = HTTPRequestData(method: "GET", url: instance.baseURL, headers: [:])
        _ = try await authorize(&request, fresh: true)
        if let authorization = request.headers["Authorization"] { return (authorization, [:]) }
        return (nil, request.headers["Cookie"].map { ["Cookie": $0] } ?? [:])
    }

    /// Adds credentials; returns whether only cookies were sent.
    private func authorize(_ request: inout HTTPRequestData, fresh: Bool) async throws -> Bool {
        request.headers["Authorization"] = nil
        request.headers["Cookie"] = nil
        switch credentials {
        case .basic(let userName, let password):
            if !cookies.isEmpty, !fresh {
                request.headers["Cookie"] = cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                    .joined(separator: "; ")
                return true
            }
            request.headers["Authorization"] = "Basic " + Data("\(userName):\(password)".utf8).base64EncodedString()
            return false
        case .oauth, .refreshToken:
            request.headers["Authorization"] = "Bearer " + (try await accessToken())
            return false
        case .openID:
            request.headers["Authorization"] = "Bearer " + (try await openIDAccessToken())
            return false
        case .sessionCookies:
            request.headers["Cookie"] = cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                .joined(separator: "; ")
            return true
        case .compass, .compassToken:
            request.headers["Authorization"] = "Bearer " + (try await compassLogin())
            return false
        case .eto:
            // Site-scoped calls carry the enterprise and the site's token as headers.
            if let eto, let enterprise = eto.enterprise, let token = eto.siteToken {
                request.headers["enterpriseGuid"] = enterprise
                request.headers["securityToken"] = token
            }
            return false
        }
    }

    /// The Compass token: the saved or current one, or a new one from `POST /ccmweb/rest/authenticate`.
    private func compassLogin() async throws -> String {
        if let compassToken { return compassToken }
        guard case .compass(let repository, let database, let userName, let password) = credentials else {
            throw DocketError(
                kind: .loginExpired, message: "the saved login has expired or was ended: log in again"
            )
        }
        let body = JSONValue(members: [
            ("username", .string(userName)), ("password", .string(password)), ("repo", .string(repository)),
            ("db", .string(database)),
        ])
        let request = HTTPRequestData(
            method: "POST", url: instance.url("/ccmweb/rest/authenticate"),
            headers: ["Content-Type": "application/json", "Accept": "application/json"], body: Data(body.serialized())
        )
        let response: HTTPResponseData
        do {
            response = try await transport.send(request)
        } catch {
            throw DocketError.transport(error, request: request)
        }
        guard (200..<300).contains(response.status) else { throw DocketError.http(response, request: request) }
        guard let token = (try? JSONValue.parse(response.body))?["token"]?.stringValue, !token.isEmpty else {
            throw DocketError(
                kind: .decoding, message: "unexpected response from the instance", detail: "no token in the login answer",
                request: "POST \(request.url.absoluteString)"
            )
        }
        compassToken = token
        return token
    }

    private func delay(after response: HTTPResponseData, attempt: Int) -> Duration {
        let requested = response.header("retry-after").flatMap(Double.init) ?? Double(1 << min(attempt, 5))
        let jitter = Double.random(in: 0..<0.25)
        let seconds = min(max(requested, 0) + jitter, Double(retryPolicy.maximumDelay.components.seconds))
        return .milliseconds(Int(seconds * 1000))
    }

    private func keepCookies(from response: HTTPResponseData) {
        for header in response.headers["set-cookie"] ?? [] {
            guard let cookie = Self.cookie(header, from: instance.baseURL) else { continue }
            // An empty value or an expiry in the past (Max-Age=0, an Expires date gone by) deletes the cookie.
            if cookie.value.isEmpty || cookie.expires.map({ $0 <= Date() }) == true {
                jar[cookie.name] = nil
            } else {
                jar[cookie.name] = (cookie.value, cookie.expires)
            }
        }
    }

    /// One `Set-Cookie` header: its name, value and expiry, nil when it names no cookie. Foundation's parser reads
    /// the attributes (`Expires` in its several date forms); `Max-Age`, which Foundation on Linux ignores, is read
    /// here and wins over `Expires` (RFC 6265 §5.3): zero or less expires the cookie at once.
    static func cookie(_ header: String, from url: URL) -> (name: String, value: String, expires: Date?)? {
        let maxAge = header.split(separator: ";").dropFirst().lazy.compactMap { attribute -> Int? in
            let parts = attribute.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces).lowercased() == "max-age" else { return nil }
            return Int(parts[1].trimmingCharacters(in: .whitespaces))
        }.last
        let fromMaxAge = maxAge.map { $0 <= 0 ? Date.distantPast : Date().addingTimeInterval(TimeInterval($0)) }
        if let parsed = HTTPCookie.cookies(withResponseHeaderFields: ["Set-Cookie": header], for: url).first {
            return (parsed.name, parsed.value, fromMaxAge ?? parsed.expiresDate)
        }
        // Foundation keeps no cookie without a value; such a header still deletes the cookie it names.
        guard let pair = header.split(separator: ";").first, let equals = pair.firstIndex(of: "=") else { return nil }
        let name = pair[..<equals].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty else { return nil }
        return (name, pair[pair.index(after: equals)...].trimmingCharacters(in: .whitespaces), fromMaxAge)
    }

    // MARK: OpenID

    /// A valid access token of the OpenID sign-in: the current one, or one refresh's (one at a time).
    func openIDAccessToken() async throws -> String {
        if let token, token.expires > Date().addingTimeInterval(30), !token.accessToken.isEmpty { return token.accessToken }
        if let refreshing { return try await refreshing.value }
        let task = Task { try await self.refreshOpenID() }
        refreshing = task
        defer { refreshing = nil }
        return try await task.value
    }

    private func refreshOpenID() async throws -> String {
        guard let login = openID, let endpoint = URL(string: login.tokenEndpoint) else {
            throw DocketError(kind: .invalidRequest, message: "this session does not use OpenID")
        }
        let tokens: OpenIDTokens
        do {
            tokens = try await OpenIDClient(transport: transport).refresh(
                tokenEndpoint: endpoint, refreshToken: login.refreshToken, clientID: login.clientID, clientSecret: login.clientSecret
            )
        } catch let error as DocketError where error.kind == .http && [400, 401].contains(error.status ?? 0) {
            throw DocketError(
                kind: .loginExpired, status: error.status, message: "the sign-in has expired or was ended: sign in again", detail: error.detail,
                request: error.request
            )
        }
        token = OAuthToken(accessToken: tokens.accessToken, refreshToken: nil, expires: Date().addingTimeInterval(TimeInterval(tokens.expiresIn)))
        if let rotated = tokens.refreshToken, rotated != login.refreshToken {
            var updated = login
            updated.refreshToken = rotated
            openID = updated
            // Saved at once: the old refresh token is spent.
            credentialsDidChange?(.openID(updated))
        }
        return tokens.accessToken
    }

    // MARK: OAuth

    /// A valid access token: the current one, a refreshed one, or one from a new password grant.
    func accessToken() async throws -> String {
        if let token, token.expires > Date().addingTimeInterval(30), !token.accessToken.isEmpty {
            return token.accessToken
        }
        if case .refreshToken(let clientID, let clientSecret, _, let refresh) = credentials {
            do {
                return try await grant([
                    ("grant_type", "refresh_token"), ("client_id", clientID), ("client_secret", clientSecret),
                    ("refresh_token", refresh),
                ])
            } catch let error as DocketError where error.kind == .http {
                throw DocketError(
                    kind: .loginExpired, status: error.status, message: "the saved login has expired or was ended: log in again",
                    request: error.request
                )
            }
        }
        guard case .oauth(let clientID, let clientSecret, let userName, let password) = credentials else {
            throw DocketError(kind: .invalidRequest, message: "this session does not use OAuth")
        }
        if let refresh = token?.refreshToken,
            let refreshed = try? await grant([
                ("grant_type", "refresh_token"), ("client_id", clientID), ("client_secret", clientSecret),
                ("refresh_token", refresh),
            ])
        {
            return refreshed
        }
        return try await grant([
            ("grant_type", "password"), ("client_id", clientID), ("client_secret", clientSecret),
            ("username", userName), ("password", password),
        ])
    }

    private func grant(_ form: [(String, String)]) async throws -> String {
        let body = Data(form.map { Instance.encode($0.0) + "=" + Instance.encode($0.1) }.joined(separator: "&").utf8)
        let request = HTTPRequestData(
            method: "POST", url: instance.url("/oauth_token.do"),
            headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"], body: body
        )
        let response: HTTPResponseData
        do {
            response = try await transport.send(request)
        } catch {
            throw DocketError.transport(error, request: request)
        }
        guard response.status == 200 else { throw DocketError.http(response, request: request) }
        struct Grant: Decodable {
            var access_token: String
            var refresh_token: String?
            var expires_in: Double?
        }
        do {
            let grant = try JSONDecoder().decode(Grant.self, from: response.body)
            token = OAuthToken(
                accessToken: grant.access_token, refreshToken: grant.refresh_token ?? token?.refreshToken,
                expires: Date().addingTimeInterval(grant.expires_in ?? 1800)
            )
            return grant.access_token
        } catch {
            throw DocketError.decoding(error, request: request)
        }
    }
}
