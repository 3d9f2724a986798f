import Crypto
import DocketModel
import Foundation

/// An OpenID Connect provider as a relying party sees it: its discovery document (OpenID Connect Discovery 1.0),
/// read tolerantly (only the endpoints Docket uses are required).
public struct OpenIDConfiguration: Sendable, Equatable, Codable {
    public var issuer: String
    public var authorizationEndpoint: String?
    public var tokenEndpoint: String
    public var userinfoEndpoint: String?
    public var revocationEndpoint: String?
    public var endSessionEndpoint: String?
    public var deviceAuthorizationEndpoint: String?
    public var jwksURI: String?

    enum CodingKeys: String, CodingKey {
        case issuer
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case userinfoEndpoint = "userinfo_endpoint"
        case revocationEndpoint = "revocation_endpoint"
        case endSessionEndpoint = "end_session_endpoint"
        case deviceAuthorizationEndpoint = "device_authorization_endpoint"
        case jwksURI = "jwks_uri"
    }
}

/// A device authorization in progress (RFC 8628 §3.2): what to show the person, and what to poll with.
public struct DeviceAuthorization: Sendable, Equatable {
    public var deviceCode: String
    public var userCode: String
    public var verificationURI: String
    public var verificationURIComplete: String?
    public var expiresIn: Int
    public var interval: Int
}

/// Tokens from a provider's token endpoint.
public struct OpenIDTokens: Sendable, Equatable {
    public var accessToken: String
    public var refreshToken: String?
    public var idToken: String?
    public var expiresIn: Int

    /// A claim of the access token, read without verifying it (for display: the provider's own APIs verify it).
    public func claim(_ name: String) -> String? {
        let parts = accessToken.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var text = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text), let payload = try? JSONValue.parse(data) else { return nil }
        return payload[name]?.stringValue
    }
}

/// An authorization request in progress (authorization code with PKCE): the URL to open in a browser, and what
/// the answer must match.
public struct AuthorizationRequest: Sendable, Equatable {
    public var url: URL
    public var redirectURI: String
    public var state: String
    public var nonce: String
    public var codeVerifier: String
}

/// The requests of a relying party: discovery, the device grant, refresh (with rotation), revocation. Errors are
/// ``DocketError``s; an OAuth error's code (`authorization_pending`, `invalid_grant`, …) is its `detail`.
public struct OpenIDClient: Sendable {
    public let transport: any Transport

    public init(transport: any Transport = URLSessionTransport()) { self.transport = transport }

    /// Reads `{issuer}/.well-known/openid-configuration` and checks that it names the issuer asked for.
    public func discover(issuer: URL) async throws -> OpenIDConfiguration {
        let url = issuer.appendingPathComponent(".well-known").appendingPathComponent("openid-configuration")
        let request = HTTPRequestData(method: "GET", url: url, headers: ["Accept": "application/json"])
        let response = try await send(request)
        let configuration: OpenIDConfiguration
        do {
            configuration = try JSONDecoder().decode(OpenIDConfiguration.self, from: response.body)
        } catch {
            throw DocketError.decoding(error, request: request)
        }
        guard Self.sameIssuer(configuration.issuer, issuer.absoluteString) else {
            throw DocketError(
                kind: .decoding, message: "the provider at \(issuer.absoluteString) says its issuer is \(configuration.issuer)",
                request: "GET \(url.absoluteString)"
            )
        }
        return configuration
    }

    /// Starts the device grant.
    public func startDeviceAuthorization(
        _ configuration: OpenIDConfiguration, clientID: String, clientSecret: String?, scope: String = "openid profile"
    ) async throws -> DeviceAuthorization {
        guard let endpoint = configuration.deviceAuthorizationEndpoint.flatMap(URL.init(string:)) else {
            throw DocketError(kind: .invalidRequest, message: "the provider \(configuration.issuer) offers no device sign-in")
        }
        let response = try await form(endpoint, client(clientID, clientSecret) + [("scope", scope)])
        struct Answer: Decodable {
            var device_code: String
            var user_code: String
            var verification_uri: String
            var verification_uri_complete: String?
            var expires_in: Int
            var interval: Int?
        }
        let answer = try decode(Answer.self, response.response, response.request)
        return DeviceAuthorization(
            deviceCode: answer.device_code, userCode: answer.user_code, verificationURI: answer.verification_uri,
            verificationURIComplete: answer.verification_uri_complete, expiresIn: answer.expires_in, interval: max(1, answer.interval ?? 5)
        )
    }

    /// Polls until the person decides (RFC 8628 §3.4–3.5): waits `interval` between polls, 5 seconds more after
    /// each `slow_down`; throws when they refuse, the code expires, or `deadline` passes.
    public func pollDeviceToken(
        _ configuration: OpenIDConfiguration, authorization: DeviceAuthorization, clientID: String, clientSecret: String?,
        sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) async throws -> OpenIDTokens {
        guard let endpoint = URL(string: configuration.tokenEndpoint) else {
            throw DocketError(kind: .invalidRequest, message: "the provider's token endpoint is not a URL")
        }
        var interval = authorization.interval
        let deadline = Date().addingTimeInterval(TimeInterval(authorization.expiresIn))
        while Date() < deadline {
            try await sleep(.seconds(interval))
            do {
                return try await tokens(endpoint, client(clientID, clientSecret) + [
                    ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", authorization.deviceCode),
                ])
            } catch let error as DocketError where error.kind == .http && error.detail == "authorization_pending" {
                continue
            } catch let error as DocketError where error.kind == .http && error.detail == "slow_down" {
                interval += 5
            }
        }
        throw DocketError(kind: .loginExpired, message: "the sign-in code expired before it was used: start again")
    }

    /// An authorization request with PKCE (S256), `state` and `nonce` for a client whose browser step returns to
    /// `redirectURI` (a loopback address, an app's own scheme).
    public func authorizationRequest(
        _ configuration: OpenIDConfiguration, clientID: String, redirectURI: String, scope: String = "openid profile", loginHint: String? = nil
    ) throws -> AuthorizationRequest {
        guard let endpoint = configuration.authorizationEndpoint, var components = URLComponents(string: endpoint) else {
            throw DocketError(kind: .invalidRequest, message: "the provider \(configuration.issuer) names no authorization endpoint")
        }
        let verifier = Self.random(32)
        let state = Self.random(16)
        let nonce = Self.random(16)
        var items = components.queryItems ?? []
        items += [
            URLQueryItem(name: "response_type", value: "code"), URLQueryItem(name: "client_id", value: clientID),
            URLQueryItem(name: "redirect_uri", value: redirectURI), URLQueryItem(name: "scope", value: scope),
            URLQueryItem(name: "state", value: state), URLQueryItem(name: "nonce", value: nonce),
            URLQueryItem(name: "code_challenge", value: Self.challenge(verifier)), URLQueryItem(name: "code_challenge_method", value: "S256"),
        ]
        if let loginHint { items.append(URLQueryItem(name: "login_hint", value: loginHint)) }
        components.queryItems = items
        // `+` means a space to a form decoder: spell it out.
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        guard let url = components.url else { throw DocketError(kind: .invalidRequest, message: "the authorization URL could not be made") }
        return AuthorizationRequest(url: url, redirectURI: redirectURI, state: state, nonce: nonce, codeVerifier: verifier)
    }

    /// Finishes an authorization request with the URL the browser was sent back to: checks its `state`, reports
    /// the provider's refusal, and exchanges the code (with the PKCE verifier).
    public func finish(
        _ request: AuthorizationRequest, callback: URL, configuration: OpenIDConfiguration, clientID: String, clientSecret: String?
    ) async throws -> OpenIDTokens {
        let items = URLComponents(url: callback, resolvingAgainstBaseURL: false)?.queryItems ?? []
        func value(_ name: String) -> String? { items.first { $0.name == name }?.value }
        guard value("state") == request.state else {
            throw DocketError(kind: .invalidRequest, message: "the sign-in came back without this request's state: it was not this sign-in")
        }
        if let error = value("error") {
            throw DocketError(kind: .http, status: 400, message: value("error_description") ?? error, detail: error)
        }
        guard let code = value("code"), let endpoint = URL(string: configuration.tokenEndpoint) else {
            throw DocketError(kind: .invalidRequest, message: "the sign-in came back without a code")
        }
        return try await tokens(endpoint, client(clientID, clientSecret) + [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", request.redirectURI), ("code_verifier", request.codeVerifier),
        ])
    }

    /// RFC 7636's S256 challenge of a verifier.
    static func challenge(_ verifier: String) -> String {
        base64URL(Data(SHA256.hash(data: Data(verifier.utf8))))
    }

    private static func random(_ count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return base64URL(Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }))
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Uses a refresh token; a provider that rotates them returns the next one (keep it at once: the old one is spent).
    public func refresh(tokenEndpoint: URL, refreshToken: String, clientID: String, clientSecret: String?) async throws -> OpenIDTokens {
        try await tokens(tokenEndpoint, client(clientID, clientSecret) + [("grant_type", "refresh_token"), ("refresh_token", refreshToken)])
    }

    /// Revokes a token (RFC 7009); the provider ends what was issued with it.
    public func revoke(endpoint: URL, token: String, clientID: String, clientSecret: String?) async throws {
        _ = try await form(endpoint, client(clientID, clientSecret) + [("token", token)])
    }

    // MARK: Requests

    private func client(_ id: String, _ secret: String?) -> [(String, String)] {
        [("client_id", id)] + (secret.map { [("client_secret", $0)] } ?? [])
    }

    private func tokens(_ endpoint: URL, _ fields: [(String, String)]) async throws -> OpenIDTokens {
        let response = try await form(endpoint, fields)
        struct Answer: Decodable {
            var access_token: String
            var refresh_token: String?
            var id_token: String?
            var expires_in: Int?
        }
        let answer = try decode(Answer.self, response.response, response.request)
        return OpenIDTokens(
            accessToken: answer.access_token, refreshToken: answer.refresh_token, idToken: answer.id_token, expiresIn: answer.expires_in ?? 300
        )
    }

    private func form(_ url: URL, _ fields: [(String, String)]) async throws -> (response: HTTPResponseData, request: HTTPRequestData) {
        let body = fields.map { Instance.encode($0.0) + "=" + Instance.encode($0.1) }.joined(separator: "&")
        let request = HTTPRequestData(
            method: "POST", url: url, headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
            body: Data(body.utf8)
        )
        return (try await send(request), request)
    }

    private func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
        let response: HTTPResponseData
        do {
            response = try await transport.send(request)
        } catch {
            throw DocketError.transport(error, request: request)
        }
        guard (200..<300).contains(response.status) else { throw Self.oauthError(response, request: request) }
        return response
    }

    /// An OAuth error response (RFC 6749 §5.2) as a ``DocketError``: the description as its message, the code as
    /// its detail.
    static func oauthError(_ response: HTTPResponseData, request: HTTPRequestData) -> DocketError {
        let general = DocketError.http(response, request: request)
        guard let body = try? JSONValue.parse(response.body), let code = body["error"]?.stringValue else { return general }
        return DocketError(
            kind: .http, status: response.status, message: body["error_description"]?.stringValue ?? code, detail: code,
            request: general.request, retryAfter: general.retryAfter
        )
    }

    private func decode<T: Decodable>(_ type: T.Type, _ response: HTTPResponseData, _ request: HTTPRequestData) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: response.body)
        } catch {
            throw DocketError.decoding(error, request: request)
        }
    }

    private static func sameIssuer(_ a: String, _ b: String) -> Bool {
        func trimmed(_ text: String) -> String { text.hasSuffix("/") ? String(text.dropLast()) : text }
        return trimmed(a) == trimmed(b)
    }
}
