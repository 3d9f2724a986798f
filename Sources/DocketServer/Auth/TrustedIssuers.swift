import AsyncHTTPClient
import DocketModel
import Foundation
import JWTKit
import NIOCore
import Synchronization

/// An OpenID provider whose tokens docketd accepts (`--oidc-trust`): a company's own (Keycloak, Entra ID, Okta,
/// authentik…). Its access or ID tokens are bearer credentials in every dialect, for the Docket user their
/// issuer and subject (`sub`) are linked to (``Federation``).
public struct TrustedIssuer: Sendable, Equatable {
    /// The issuer, exactly as its tokens' `iss` says it.
    public var issuer: String
    /// What a token's `aud` must contain. Without it, a token must have been issued to the `client=` id (its `aud`,
    /// `azp` or `client_id` names it, as RFC 9068 access tokens do). One of the two is required.
    public var audience: String?
    /// The claim that names the Docket user (default `preferred_username`, else `email`).
    public var usernameClaim: String?
    /// The claim that lists the user's roles, for users made on first sight (`--oidc-provision`).
    public var rolesClaim: String?
    /// docketd's own client at the provider, for "Sign in with …" in the web UI (authorization code + PKCE).
    public var clientID: String?
    /// That client's secret (read from the environment variable `secret-env` names), for a confidential client.
    public var clientSecret: String?
    /// What the sign-in page calls the provider (default: its host).
    public var name: String?

    /// The provider's name for people.
    public var label: String { name ?? URLComponents(string: issuer)?.host ?? issuer }

    public init(issuer: String, audience: String? = nil, usernameClaim: String? = nil, rolesClaim: String? = nil) {
        self.issuer = issuer
        self.audience = audience
        self.usernameClaim = usernameClaim
        self.rolesClaim = rolesClaim
    }

    /// Reads `ISSUER[,audience=AUD][,username=CLAIM][,roles=CLAIM][,client=ID][,secret-env=VAR][,name=LABEL]`.
    public static func parse(_ text: String) throws(TrustedIssuerError) -> TrustedIssuer {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let issuer = parts.first, let url = URLComponents(string: issuer), let scheme = url.scheme?.lowercased(),
            scheme == "https" || scheme == "http", url.host?.isEmpty == false, url.query == nil, url.fragment == nil
        else { throw TrustedIssuerError("'\(parts.first ?? "")' is not an issuer URL (https://host/path)") }
        var trusted = TrustedIssuer(issuer: issuer)
        for option in parts.dropFirst() {
            let pair = option.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2, !pair[1].isEmpty else { throw TrustedIssuerError("'\(option)' is not NAME=VALUE (audience, username or roles)") }
            switch pair[0] {
            case "audience": trusted.audience = pair[1]
            case "username": trusted.usernameClaim = pair[1]
            case "roles": trusted.rolesClaim = pair[1]
            case "client": trusted.clientID = pair[1]
            case "name": trusted.name = pair[1]
            case "secret-env":
                guard let secret = ProcessInfo.processInfo.environment[pair[1]], !secret.isEmpty else {
                    throw TrustedIssuerError("the environment variable \(pair[1]) (secret-env) is not set")
                }
                trusted.clientSecret = secret
            default: throw TrustedIssuerError("unknown option '\(pair[0])': audience, username, roles, client, secret-env or name")
            }
        }
        // Without an audience, a token the provider issued to any other application would sign in here too.
        guard trusted.audience != nil || trusted.clientID != nil else {
            throw TrustedIssuerError(
                "'\(issuer)' needs audience=AUD: the value the provider puts in the aud claim of tokens meant for docketd (or client=ID, when that is it)"
            )
        }
        return trusted
    }
}

public struct TrustedIssuerError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The trusted issuers' key sets, fetched through their discovery documents and cached; fetched again when a
/// token names a key they do not hold (a rotation), at most every ``refetchInterval``. Verification: the
/// signature with an allowed algorithm (never `none` or a shared secret), `iss` exact, `aud` when configured,
/// `exp` and `nbf` with ``leeway``.
final class TrustedIssuers: Sendable {
    /// What a verified token says.
    struct Verified: Sendable, Equatable {
        var issuer: TrustedIssuer
        /// The provider's own, stable name for the person (`sub`): what a link to a local account is made by.
        var subject: String
        /// The name the token suggests for a new account (the username claim), when it has one; anyone may be
        /// able to choose it.
        var userName: String?
        var roles: [String]
        /// The e-mail address, when the token has one.
        var email: String? = nil
        /// Whether the provider says it checked that the person holds that address (`email_verified`).
        var emailVerified = false
    }

    /// The claims read from a token (any others are ignored).
    struct Claims: JWTPayload {
        var iss: String
        var exp: Int
        var nbf: Int?
        var aud: AudienceClaim?
        var other: [String: JSONValue]

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: AnyKey.self)
            iss = try container.decode(String.self, forKey: AnyKey("iss"))
            exp = Self.seconds(try container.decode(Double.self, forKey: AnyKey("exp")))
            nbf = try container.decodeIfPresent(Double.self, forKey: AnyKey("nbf")).map(Self.seconds)
            aud = try container.decodeIfPresent(AudienceClaim.self, forKey: AnyKey("aud"))
            var other: [String: JSONValue] = [:]
            for key in container.allKeys where !["iss", "exp", "nbf", "aud"].contains(key.stringValue) {
                if let value = try? container.decode(ClaimValue.self, forKey: key) { other[key.stringValue] = value.json }
            }
            self.other = other
        }

        func encode(to encoder: any Encoder) throws {}
        func verify(using algorithm: some JWTAlgorithm) throws {}

        /// A NumericDate as whole seconds, kept within ±2^52 (a provider's absurd value must not trap).
        static func seconds(_ value: Double) -> Int {
            guard value.isFinite else { return value > 0 ? 1 << 52 : -(1 << 52) }
            return Int(min(max(value, -4.5e15), 4.5e15))
        }
    }

    static let allowedAlgorithms: Set<String> = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]
    static let leeway = 60
    /// The least time between fetches of one issuer's keys caused by tokens naming a key it does not hold (Keycloak's
    /// adapters wait 10 s too): a forged `kid` cannot make every request call the provider.
    static let refetchInterval = 10
    static let maximumDocument = 1024 * 1024

    private struct Keys {
        var collection: JWTKeyCollection
        var kids: Set<String>
        var fetchedAt: Int
        var authorizationEndpoint: String?
        var tokenEndpoint: String?
    }

    let issuers: [TrustedIssuer]
    private let client: HTTPClient
    private let keys = Mutex<[String: Keys]>([:])
    /// Fetches under way (callers at once share one) and the last failure of each issuer's, remembered for
    /// ``refetchInterval``: a provider that is down is not asked again by every request meanwhile.
    private let fetching = Mutex<(running: [String: Task<Keys, any Error>], failed: [String: (at: Int, error: Unreachable)])>(([:], [:]))

    init(_ issuers: [TrustedIssuer], client: HTTPClient = .shared) {
        self.issuers = issuers
        self.client = client
    }

    /// The trusted issuer a token claims to come from (read before any check); nil when it names none of them.
    func issuer(of token: String) -> TrustedIssuer? {
        guard !issuers.isEmpty else { return nil }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1].utf8.count <= 16_384, let bytes = Base64URL.decode(parts[1]),
            let payload = try? JSONValue.parse(bytes), let iss = payload["iss"]?.stringValue
        else { return nil }
        return issuers.first { $0.issuer == iss }
    }

    /// Verifies a token of a trusted issuer; nil when it does not hold. Throws ``StorageUnavailable``-like
    /// ``Unreachable`` when the issuer's keys could not be fetched: no answer about the token.
    func verify(
        _ token: String, issuer: TrustedIssuer, audience: String?? = .none, nonce: String? = nil, now: Int = SessionStore.now()
    ) async throws -> Verified? {
        guard token.utf8.count <= 16_384, let header = Self.header(token), let alg = header["alg"]?.stringValue,
            Self.allowedAlgorithms.contains(alg)
        else { return nil }
        let kid = header["kid"]?.stringValue
        var cached = keys.withLock { $0[issuer.issuer] }
        if cached == nil || (kid.map { !cached!.kids.contains($0) } ?? false)
            && now.subtractingReportingOverflow(cached!.fetchedAt).partialValue >= Self.refetchInterval
        {
            cached = try await refetch(issuer, now: now)
        }
        guard let cached, kid.map(cached.kids.contains) ?? true else { return nil }
        let claims: Claims
        do {
            claims = try await cached.collection.verify(token, as: Claims.self)
        } catch {
            return nil
        }
        guard claims.iss == issuer.issuer, claims.exp + Self.leeway > now, (claims.nbf ?? 0) <= now + Self.leeway else { return nil }
        // An ID token is for docketd's client; an access token for the audience configured, else issued to
        // docketd's client.
        if let expected = audience ?? issuer.audience {
            guard claims.aud?.value.contains(expected) == true else { return nil }
        } else if let client = issuer.clientID {
            guard claims.aud?.value.contains(client) == true || claims.other["azp"]?.stringValue == client
                || claims.other["client_id"]?.stringValue == client
            else { return nil }
        } else {
            return nil
        }
        guard let subject = claims.other["sub"]?.stringValue, !subject.isEmpty, subject.utf8.count <= 255 else { return nil }
        if let nonce {
            guard claims.other["nonce"]?.stringValue == nonce else { return nil }
        }
        let userName: String?
        if let claim = issuer.usernameClaim {
            userName = claims.other[claim]?.stringValue
        } else {
            userName = claims.other["preferred_username"]?.stringValue ?? claims.other["email"]?.stringValue
        }
        // Needed only to name a new account: a linked identity signs in without it (many access tokens lack it).
        let suggested = userName.flatMap { $0.isEmpty || $0.count > 100 ? nil : $0 }
        var roles: [String] = []
        if let claim = issuer.rolesClaim {
            var value: JSONValue? = claims.other[claim]
            // `realm_access.roles` (Keycloak) names a path.
            if value == nil, claim.contains(".") {
                let path = claim.split(separator: ".").map(String.init)
                value = claims.other[path[0]]
                for step in path.dropFirst() { value = value?[step] }
            }
            roles = value?.arrayValue?.compactMap(\.stringValue) ?? []
        }
        let email = claims.other["email"]?.stringValue.flatMap { $0.isEmpty || $0.utf8.count > 255 ? nil : $0 }
        let verified: Bool
        switch claims.other["email_verified"] {
        case .bool(let value)?: verified = value
        case .string(let text)?: verified = text == "true"
        default: verified = false
        }
        return Verified(issuer: issuer, subject: subject, userName: suggested, roles: roles, email: email, emailVerified: email != nil && verified)
    }

    /// The issuer could not be reached (or answered nonsense) when its keys were needed.
    struct Unreachable: Error, CustomStringConvertible {
        let issuer: String
        let reason: String
        var description: String { "The trusted OpenID provider \(issuer) could not be reached: \(reason)" }
    }

    /// The issuer's keys fetched again: one fetch for all who ask at once; a failure less than ``refetchInterval``
    /// ago is given again without asking the provider.
    private func refetch(_ issuer: TrustedIssuer, now: Int) async throws -> Keys {
        enum Next { case wait(Task<Keys, any Error>), failed(Unreachable) }
        let next = fetching.withLock { state -> Next in
            if let running = state.running[issuer.issuer] { return .wait(running) }
            if let failed = state.failed[issuer.issuer], now.subtractingReportingOverflow(failed.at).partialValue < Self.refetchInterval,
                failed.at <= now
            {
                return .failed(failed.error)
            }
            let task = Task {
                do {
                    let fetched = try await self.fetch(issuer, now: now)
                    self.fetching.withLock { state in
                        state.running[issuer.issuer] = nil
                        state.failed[issuer.issuer] = nil
                    }
                    return fetched
                } catch {
                    let unreachable = error as? Unreachable ?? Unreachable(issuer: issuer.issuer, reason: "\(error)")
                    self.fetching.withLock { state in
                        state.running[issuer.issuer] = nil
                        state.failed[issuer.issuer] = (now, unreachable)
                    }
                    throw unreachable
                }
            }
            state.running[issuer.issuer] = task
            return .wait(task)
        }
        switch next {
        case .wait(let task): return try await task.value
        case .failed(let error): throw error
        }
    }

    private func fetch(_ issuer: TrustedIssuer, now: Int) async throws -> Keys {
        let base = issuer.issuer.hasSuffix("/") ? String(issuer.issuer.dropLast()) : issuer.issuer
        let discovery = try await get(base + "/.well-known/openid-configuration", issuer: issuer.issuer)
        guard discovery["issuer"]?.stringValue == issuer.issuer, let jwksURI = discovery["jwks_uri"]?.stringValue else {
            throw Unreachable(issuer: issuer.issuer, reason: "its discovery document names another issuer or no jwks_uri")
        }
        let set = try await get(jwksURI, issuer: issuer.issuer)
        let collection = JWTKeyCollection()
        var kids = Set<String>()
        for key in set["keys"]?.arrayValue ?? [] {
            // Signing keys of allowed algorithms only (an `oct` key would be a shared secret anyone could hold).
            guard ["RSA", "EC"].contains(key["kty"]?.stringValue ?? ""), key["use"]?.stringValue ?? "sig" == "sig",
                key["alg"].map({ Self.allowedAlgorithms.contains($0.stringValue ?? "") }) ?? true,
                let data = String(bytes: key.serialized(), encoding: .utf8)
            else { continue }
            do {
                let jwk = try JSONDecoder().decode(JWK.self, from: Data(data.utf8))
                _ = try await collection.add(jwk: jwk)
                if let kid = key["kid"]?.stringValue { kids.insert(kid) }
            } catch {
                continue
            }
        }
        let fetched = Keys(
            collection: collection, kids: kids, fetchedAt: now, authorizationEndpoint: discovery["authorization_endpoint"]?.stringValue,
            tokenEndpoint: discovery["token_endpoint"]?.stringValue
        )
        keys.withLock { $0[issuer.issuer] = fetched }
        return fetched
    }

    /// The provider's authorization and token endpoints (its discovery document, fetched when not held).
    func endpoints(of issuer: TrustedIssuer, now: Int = SessionStore.now()) async throws -> (authorization: String, token: String) {
        var held = keys.withLock { $0[issuer.issuer] }
        if held?.authorizationEndpoint == nil || held?.tokenEndpoint == nil { held = try await refetch(issuer, now: now) }
        guard let authorization = held?.authorizationEndpoint, let token = held?.tokenEndpoint else {
            throw Unreachable(issuer: issuer.issuer, reason: "its discovery document names no authorization or token endpoint")
        }
        return (authorization, token)
    }

    /// Exchanges an authorization code at the provider's token endpoint (docketd's client, PKCE); the ID token.
    func exchange(code: String, verifier: String, redirectURI: String, issuer: TrustedIssuer) async throws -> String? {
        guard let clientID = issuer.clientID else { return nil }
        let (_, endpoint) = try await endpoints(of: issuer)
        guard let url = URL(string: endpoint), ["https", "http"].contains(url.scheme?.lowercased() ?? "") else {
            throw Unreachable(issuer: issuer.issuer, reason: "its token endpoint is not an HTTP address")
        }
        var fields = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI), ("code_verifier", verifier)]
        var request = HTTPClientRequest(url: endpoint)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        if let secret = issuer.clientSecret {
            let credentials = Data((Self.formEscape(clientID) + ":" + Self.formEscape(secret)).utf8).base64EncodedString()
            request.headers.add(name: "Authorization", value: "Basic " + credentials)
        } else {
            fields.append(("client_id", clientID))
        }
        request.body = .bytes(ByteBuffer(string: fields.map { Self.formEscape($0.0) + "=" + Self.formEscape($0.1) }.joined(separator: "&")))
        let body: ByteBuffer
        let status: UInt
        do {
            let response = try await client.execute(request, timeout: .seconds(10))
            status = response.status.code
            body = try await response.body.collect(upTo: Self.maximumDocument)
        } catch {
            throw Unreachable(issuer: issuer.issuer, reason: "\(endpoint): \(error)")
        }
        if status >= 500 { throw Unreachable(issuer: issuer.issuer, reason: "\(endpoint) answered \(status)") }
        guard status == 200, let answer = try? JSONValue.parse(Data(body.readableBytesView)) else { return nil }
        return answer["id_token"]?.stringValue
    }

    /// `application/x-www-form-urlencoded` escaping (RFC 6749 §2.3.1 asks it of Basic credentials too).
    static func formEscape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? ""
    }

    private func get(_ url: String, issuer: String) async throws -> JSONValue {
        guard let parsed = URL(string: url), ["https", "http"].contains(parsed.scheme?.lowercased() ?? "") else {
            throw Unreachable(issuer: issuer, reason: "\(url) is not an HTTP address")
        }
        do {
            var request = HTTPClientRequest(url: url)
            request.headers.add(name: "Accept", value: "application/json")
            let response = try await client.execute(request, timeout: .seconds(5))
            guard response.status == .ok else { throw Unreachable(issuer: issuer, reason: "\(url) answered \(response.status.code)") }
            let body = try await response.body.collect(upTo: Self.maximumDocument)
            return try JSONValue.parse(Data(body.readableBytesView))
        } catch let error as Unreachable {
            throw error
        } catch {
            throw Unreachable(issuer: issuer, reason: "\(url): \(error)")
        }
    }

    private static func header(_ token: String) -> JSONValue? {
        guard let first = token.split(separator: ".", maxSplits: 1).first, first.utf8.count <= 2048, let bytes = Base64URL.decode(first) else {
            return nil
        }
        return try? JSONValue.parse(bytes)
    }
}

/// `aud`: one string or a list.
struct AudienceClaim: Codable, Sendable {
    var value: [String]
    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let one = try? container.decode(String.self) { value = [one] } else { value = try container.decode([String].self) }
    }
    func encode(to encoder: any Encoder) throws {}
}

/// Any claim's value, kept as JSON.
private struct ClaimValue: Decodable {
    var json: JSONValue
    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            json = .string(text)
        } else if let list = try? container.decode([ClaimValue].self) {
            json = .array(list.map(\.json))
        } else if let object = try? container.decode([String: ClaimValue].self) {
            json = .object(.init(uniqueKeysWithValues: object.map { ($0.key, $0.value.json) }))
        } else if let flag = try? container.decode(Bool.self) {
            json = .bool(flag)
        } else if let number = try? container.decode(Int.self) {
            json = .integer(number)
        } else {
            json = .null
        }
    }
}

struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
