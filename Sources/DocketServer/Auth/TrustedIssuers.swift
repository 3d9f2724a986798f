import AsyncHTTPClient
import DocketModel
import Foundation
import JWTKit
import NIOCore
import Synchronization

/// An OpenID provider whose tokens docketd accepts (`--oidc-trust`): a company's own (Keycloak, Entra ID, Okta,
/// authentik…). Its access or ID tokens are bearer credentials in every dialect, for the Docket user whose
/// `user_name` equals a claim of the token.
public struct TrustedIssuer: Sendable, Equatable {
    /// The issuer, exactly as its tokens' `iss` says it.
    public var issuer: String
    /// When given, a token's `aud` must contain it.
    public var audience: String?
    /// The claim that names the Docket user (default `preferred_username`, else `email`).
    public var usernameClaim: String?
    /// The claim that lists the user's roles, for users made on first sight (`--oidc-provision`).
    public var rolesClaim: String?

    public init(issuer: String, audience: String? = nil, usernameClaim: String? = nil, rolesClaim: String? = nil) {
        self.issuer = issuer
        self.audience = audience
        self.usernameClaim = usernameClaim
        self.rolesClaim = rolesClaim
    }

    /// Reads `ISSUER[,audience=AUD][,username=CLAIM][,roles=CLAIM]`.
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
            default: throw TrustedIssuerError("unknown option '\(pair[0])': audience, username or roles")
            }
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
        var userName: String
        var roles: [String]
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
            exp = Int(try container.decode(Double.self, forKey: AnyKey("exp")))
            nbf = try container.decodeIfPresent(Double.self, forKey: AnyKey("nbf")).map { Int($0) }
            aud = try container.decodeIfPresent(AudienceClaim.self, forKey: AnyKey("aud"))
            var other: [String: JSONValue] = [:]
            for key in container.allKeys where !["iss", "exp", "nbf", "aud"].contains(key.stringValue) {
                if let value = try? container.decode(ClaimValue.self, forKey: key) { other[key.stringValue] = value.json }
            }
            self.other = other
        }

        func encode(to encoder: any Encoder) throws {}
        func verify(using algorithm: some JWTAlgorithm) throws {}
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
    }

    let issuers: [TrustedIssuer]
    private let client: HTTPClient
    private let keys = Mutex<[String: Keys]>([:])

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
    func verify(_ token: String, issuer: TrustedIssuer, now: Int = SessionStore.now()) async throws -> Verified? {
        guard token.utf8.count <= 16_384, let header = Self.header(token), let alg = header["alg"]?.stringValue,
            Self.allowedAlgorithms.contains(alg)
        else { return nil }
        let kid = header["kid"]?.stringValue
        var cached = keys.withLock { $0[issuer.issuer] }
        if cached == nil || (kid.map { !cached!.kids.contains($0) } ?? false)
            && now.subtractingReportingOverflow(cached!.fetchedAt).partialValue >= Self.refetchInterval
        {
            cached = try await fetch(issuer, now: now)
        }
        guard let cached, kid.map(cached.kids.contains) ?? true else { return nil }
        let claims: Claims
        do {
            claims = try await cached.collection.verify(token, as: Claims.self)
        } catch {
            return nil
        }
        guard claims.iss == issuer.issuer, claims.exp + Self.leeway > now, (claims.nbf ?? 0) <= now + Self.leeway else { return nil }
        if let audience = issuer.audience {
            guard claims.aud?.value.contains(audience) == true else { return nil }
        }
        let userName: String?
        if let claim = issuer.usernameClaim {
            userName = claims.other[claim]?.stringValue
        } else {
            userName = claims.other["preferred_username"]?.stringValue ?? claims.other["email"]?.stringValue
        }
        guard let userName, !userName.isEmpty, userName.count <= 100 else { return nil }
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
        return Verified(issuer: issuer, userName: userName, roles: roles)
    }

    /// The issuer could not be reached (or answered nonsense) when its keys were needed.
    struct Unreachable: Error, CustomStringConvertible {
        let issuer: String
        let reason: String
        var description: String { "The trusted OpenID provider \(issuer) could not be reached: \(reason)" }
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
        let fetched = Keys(collection: collection, kids: kids, fetchedAt: now)
        keys.withLock { $0[issuer.issuer] = fetched }
        return fetched
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
