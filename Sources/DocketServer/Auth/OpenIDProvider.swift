import Crypto
import DocketModel
import Foundation
import JWTKit
import OrderedCollections
import Synchronization

/// docketd as an OpenID Connect provider, shaped like a Keycloak realm: the token service behind the OIDC dialect's
/// routes. It authenticates clients (``OAuthDirectory``'s registry, shared with ServiceNow's OAuth), runs the grants
/// (authorization code with PKCE, refresh token with rotation, password), signs RS256 access and ID tokens with
/// ``TokenKeys`` (RFC 9068 profile with Keycloak's claims), and answers what a token is (bearer checks for every
/// dialect, userinfo, introspection), revocation and logout. What instances share is in storage
/// (``OpenIDGrants``): every access token names its session (`sid`), and a token is good while its signature, its
/// expiry and its session hold.
final class OpenIDProvider: Sendable, ChangeObserver {
    /// The grants this provider runs.
    static let deviceGrant = "urn:ietf:params:oauth:grant-type:device_code"
    static let grantTypes = ["authorization_code", "refresh_token", "password", "client_credentials", deviceGrant]
    /// How long a device code waits for its person (RFC 8628 §3.2's `expires_in`), and how often it may be polled.
    static let deviceLifetime = 600
    static let deviceInterval = 5

    /// The user a confidential client acts as with the client_credentials grant (Keycloak's service account):
    /// made with the client, without a password, with the roles an administrator gives it.
    static func serviceAccount(of clientID: String) -> String { "service-account-" + clientID }

    /// Whom a client_credentials grant acts as: the client's OAuth Application User (`oauth_entity.user`) when set,
    /// else its service account. The same at `/oauth_token.do` and at the OpenID token endpoint.
    static func clientCredentialsAccount(of client: OAuthDirectory.Client, users: UserDirectory) async throws -> UserDirectory.Account? {
        if !client.applicationUser.isEmpty { return try await users.account(userID: client.applicationUser) }
        return try await users.account(userName: serviceAccount(of: client.clientID))
    }
    static let scopes = ["openid", "profile", "email", "roles", "offline_access"]
    /// The longest an access or ID token lives, whatever the client's lifespan says: the signing keys' retention
    /// must cover it.
    static let maximumAccessLifetime = CompassTokens.lifetime
    /// How long an authorization code may wait for its exchange.
    static let codeLifetime = 60
    /// The audience of access tokens: this server's APIs.
    static let audience = "docket"

    let realm: String
    let storage: any Storage
    let keys: TokenKeys
    let directory: OAuthDirectory
    let oauth: OAuthService
    let authenticator: Authenticator
    /// Sessions seen live, in memory: sid → (user, expiry). Not consulted where other docketd share the database
    /// (they may end a session this process would not hear of); dropped at once on a logout here and on a change
    /// to a user's credentials.
    private let sessions = Mutex<[String: (userID: String, expires: Int, issuer: String?)]>([:])
    /// Access tokens whose signature was checked, until they expire: a signature does not stop holding, so a
    /// bearer request pays for RSA and JSON once per token (its session is still checked every time).
    private let verifiedTokens = Mutex<[String: AccessClaims]>([:])
    /// Unknown user codes entered per user: (how many, since when).
    let deviceFailures = Mutex<[String: (count: Int, since: Int)]>([:])
    static let verifiedTokenMemory = 20_000

    /// With `--public-url`, the issuers docketd mints with (`{url}/realms/{realm}` and `{url}/auth/realms/{realm}`): no
    /// access token names another. Empty otherwise (each session keeps the issuer it began with).
    let publicIssuers: Set<String>

    init(
        realm: String, storage: any Storage, keys: TokenKeys, directory: OAuthDirectory, oauth: OAuthService, authenticator: Authenticator,
        publicURL: String? = nil
    ) {
        var issuers: Set<String> = []
        if var base = publicURL, !base.isEmpty {
            while base.hasSuffix("/") { base.removeLast() }
            issuers = [base + "/realms/" + realm, base + "/auth/realms/" + realm]
        }
        publicIssuers = issuers
        self.realm = realm
        self.storage = storage
        self.keys = keys
        self.directory = directory
        self.oauth = oauth
        self.authenticator = authenticator
    }

    /// The issuer for a base URL (`https://host[/prefix]`): Keycloak's `{base}/realms/{realm}`.
    func issuer(base: String) -> String { base + "/realms/" + realm }

    // MARK: Clients

    /// An active client by id, without checking a secret (the authorization endpoint: the browser carries no secret).
    func client(id: String) async throws(Failure) -> OAuthDirectory.Client {
        guard !id.isEmpty, id.utf8.count <= 255 else { throw .invalidClient("The client is not known.") }
        let found: OAuthDirectory.Client?
        do { found = try await directory.client(clientID: id) } catch { throw .unavailable }
        guard let found, found.active else { throw .invalidClient("The client is not known.") }
        return found
    }

    /// The client a token request comes from: a public client by its id alone, a confidential one by its secret
    /// (form fields or HTTP Basic, RFC 6749 §2.3.1).
    func authenticateClient(form: [String: String], basic: (id: String, secret: String)?) async throws(Failure) -> OAuthDirectory.Client {
        let formID = form["client_id"].flatMap { $0.isEmpty ? nil : $0 }
        if let basic, let formID, formID != basic.id { throw .invalidRequest("The client is named twice, differently.") }
        guard let id = formID ?? basic?.id else { throw .invalidClient("The client is not named (client_id).") }
        let client = try await client(id: id)
        if client.isPublic { return client }
        guard let secret = basic?.secret ?? form["client_secret"], !secret.isEmpty, secret.utf8.count <= 1024 else {
            throw .invalidClient("This client must authenticate (client_secret or HTTP Basic).")
        }
        let verified: OAuthDirectory.Client?
        do { verified = try await oauth.verifyClient(id: id, secret: secret) } catch {
            throw error == .busy || error == .unavailable ? .unavailable : .invalidClient("The client's credentials are not right.")
        }
        guard let verified else { throw .invalidClient("The client's credentials are not right.") }
        return verified
    }

    /// Whether a redirect URI is one the client registered: exactly, under a registered prefix ending in `*`
    /// (Keycloak's wildcard; a prefix that ends in a host only matches that host, on any port or path), or a
    /// loopback URI on any port (RFC 8252 §7.3). Never one with a fragment or user information.
    static func accepts(redirect uri: String, registered: [String]) -> Bool {
        guard !uri.isEmpty, uri.utf8.count <= 2000, let parsed = URLComponents(string: uri), let scheme = parsed.scheme,
            parsed.fragment == nil, parsed.user == nil, parsed.password == nil
        else { return false }
        for entry in registered {
            if entry == uri { return true }
            if entry.hasSuffix("*") {
                let prefix = String(entry.dropLast())
                guard uri.hasPrefix(prefix) else { continue }
                // `http://localhost*` must not admit `http://localhost.evil.example/`.
                if let stem = URLComponents(string: prefix), let host = stem.host, stem.path.isEmpty, stem.port == nil {
                    if parsed.host == host && parsed.scheme == stem.scheme { return true }
                    continue
                }
                return true
            }
            if scheme == "http", let host = parsed.host, ["127.0.0.1", "[::1]", "::1"].contains(host),
                let stem = URLComponents(string: entry), stem.scheme == "http", stem.host == host, stem.path == parsed.path,
                stem.query == parsed.query
            {
                return true
            }
        }
        return false
    }

    // MARK: Authorization

    /// An authorization request as the `auth` endpoint reads it (after the client and redirect URI were checked).
    struct Authorization: Sendable {
        var client: OAuthDirectory.Client
        var redirectURI: String
        var scope: String
        var nonce: String
        var challenge: String
    }

    /// Starts a session for a signed-in user and returns the code for its client, with the session's id. `signIn` is
    /// the web session the user is signed in with: the sign-in starts only while it lasts (nil when it has ended).
    func authorize(
        _ request: Authorization, caller: Caller, signIn: UserDirectory.CredentialProof.Parent?, issuer: String,
        now: Int = SessionStore.now()
    ) async throws(Failure) -> (code: String, sid: String)? {
        let code = Base64URL.random(bytes: 32)
        let sid = Base64URL.random(bytes: 16)
        let session = OpenIDGrants.Session(
            sid: sid, userID: caller.userID, clientID: request.client.clientID, authTime: now,
            expires: Self.sessionExpiry(request.client, now: now), issuer: issuer
        )
        let stored = OpenIDGrants.Code(
            sid: sid, clientID: request.client.clientID, redirectURI: request.redirectURI, scope: request.scope, nonce: request.nonce,
            challenge: request.challenge, expires: now + Self.codeLifetime
        )
        do {
            try await OpenIDGrants.start(
                session, code: (OpenIDGrants.hash(code), stored), proof: .init(userID: caller.userID, parent: signIn), storage: storage
            )
        } catch is UserDirectory.CredentialEnded {
            return nil
        } catch {
            throw .unavailable
        }
        return (code, sid)
    }

    /// PKCE S256 (RFC 7636 §4.6): the verifier's SHA-256, base64url, against the challenge.
    static func verifies(_ verifier: String, challenge: String) -> Bool {
        guard (43...128).contains(verifier.utf8.count),
            verifier.utf8.allSatisfy({ byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                    || byte == 0x2d || byte == 0x2e || byte == 0x5f || byte == 0x7e
            })
        else { return false }
        let computed = Base64URL.encode(Array(SHA256.hash(data: Data(verifier.utf8))))
        return Data(computed.utf8) == Data(challenge.utf8)
    }

    // MARK: The token endpoint

    /// Runs a token request: the grant named in the form, for the client that authenticated. Returns the token
    /// response (RFC 6749 §5.1 with Keycloak's extras).
    func token(form: [String: String], basic: (id: String, secret: String)?, issuer: String, identity: Identity, address: String)
        async throws(Failure) -> JSONValue
    {
        guard let grant = form["grant_type"], !grant.isEmpty else { throw .invalidRequest("grant_type is missing.") }
        guard Self.grantTypes.contains(grant) else {
            throw Failure(error: "unsupported_grant_type", description: "The grant type \(grant.prefix(80)) is not supported.")
        }
        let client = try await authenticateClient(form: form, basic: basic)
        guard client.grantTypes.contains(grant) else { throw .unauthorizedClient("This client may not use the \(grant) grant.") }
        let now = SessionStore.now()
        switch grant {
        case "authorization_code":
            guard let code = form["code"], !code.isEmpty, code.utf8.count <= 256 else { throw .invalidRequest("code is missing.") }
            let redemption: OpenIDGrants.Redemption<OpenIDGrants.Code>
            do {
                redemption = try await OpenIDGrants.redeem(code: OpenIDGrants.hash(code), clientID: client.clientID, now: now, storage: storage)
            } catch {
                throw .unavailable
            }
            guard case .redeemed(let stored, let session) = redemption else {
                forget(sid: nil)
                throw .invalidGrant("The authorization code is invalid or expired.")
            }
            guard form["redirect_uri"] == stored.redirectURI else { throw .invalidGrant("redirect_uri is not the one the code was issued to.") }
            if !stored.challenge.isEmpty {
                guard let verifier = form["code_verifier"], Self.verifies(verifier, challenge: stored.challenge) else {
                    throw .invalidGrant("The PKCE code verifier does not match the challenge.")
                }
            } else if form["code_verifier"] != nil {
                throw .invalidGrant("The code was issued without a PKCE challenge.")
            }
            return try await issue(
                client: client, session: session, scope: stored.scope, nonce: stored.nonce, issuer: issuer, now: now, refresh: nil
            )
        case "refresh_token":
            guard let presented = form["refresh_token"], !presented.isEmpty, presented.utf8.count <= 256 else {
                throw .invalidRequest("refresh_token is missing.")
            }
            let next = Base64URL.random(bytes: 32)
            let redemption: OpenIDGrants.Redemption<OpenIDGrants.Refresh>
            do {
                redemption = try await OpenIDGrants.rotate(
                    refresh: OpenIDGrants.hash(presented), to: OpenIDGrants.hash(next), clientID: client.clientID, now: now, storage: storage
                )
            } catch {
                throw .unavailable
            }
            switch redemption {
            case .unknown:
                throw .invalidGrant("The refresh token is not active.")
            case .replayed:
                forget(sid: nil)
                throw .invalidGrant("The refresh token was used before; its session has ended.")
            case .redeemed(let refresh, let session):
                return try await issue(
                    client: client, session: session, scope: refresh.scope, nonce: refresh.nonce, issuer: issuer, now: now, refresh: next
                )
            }
        case Self.deviceGrant:
            guard let code = form["device_code"], !code.isEmpty, code.utf8.count <= 256 else { throw .invalidRequest("device_code is missing.") }
            let poll: OpenIDGrants.Poll
            do {
                poll = try await OpenIDGrants.poll(device: OpenIDGrants.hash(code), clientID: client.clientID, now: now, storage: storage)
            } catch {
                throw .unavailable
            }
            switch poll {
            case .pending: throw Failure(error: "authorization_pending", description: "The user has not decided yet.")
            case .slowDown: throw Failure(error: "slow_down", description: "Poll less often: wait 5 seconds more between requests.")
            case .denied: throw Failure(error: "access_denied", description: "The user refused the sign-in.")
            case .expired: throw Failure(error: "expired_token", description: "The device code expired; start again.")
            case .unknown: throw .invalidGrant("The device code is not known or was used.")
            case .approved(let userID, let scope):
                let session = OpenIDGrants.Session(
                    sid: Base64URL.random(bytes: 16), userID: userID, clientID: client.clientID, authTime: now,
                    expires: Self.sessionExpiry(client, now: now), issuer: issuer
                )
                do {
                    // The approval, collected by this poll, must not have been ended (a new password) since.
                    try await OpenIDGrants.start(
                        session, proof: .init(userID: userID, parent: .deviceCode(hash: OpenIDGrants.hash(code))), storage: storage)
                } catch is UserDirectory.CredentialEnded {
                    throw Failure(error: "access_denied", description: "The user can no longer sign in.")
                } catch {
                    throw .unavailable
                }
                return try await issue(client: client, session: session, scope: scope, nonce: "", issuer: issuer, now: now, refresh: nil)
            }
        case "client_credentials":
            guard !client.isPublic else { throw .unauthorizedClient("A public client cannot use client_credentials.") }
            // The client's OAuth Application User when it names one (as /oauth_token.do uses it), else its service
            // account (Keycloak's `service-account-<client_id>`).
            let account: UserDirectory.Account?
            do {
                account = try await Self.clientCredentialsAccount(of: client, users: UserDirectory(store: directory.store))
            } catch {
                throw .unavailable
            }
            guard let account, account.active, !account.lockedOut else {
                throw .unauthorizedClient(
                    "This client has no active application user or service account (\(Self.serviceAccount(of: client.clientID)))."
                )
            }
            let session = OpenIDGrants.Session(
                sid: Base64URL.random(bytes: 16), userID: account.userID, clientID: client.clientID, authTime: now,
                expires: now + max(1, min(client.accessLifespan, Self.maximumAccessLifetime)), issuer: issuer
            )
            do {
                try await OpenIDGrants.start(session, proof: .init(userID: account.userID), storage: storage)
            } catch is UserDirectory.CredentialEnded {
                throw .unauthorizedClient("This client's application user or service account can no longer sign in.")
            } catch {
                throw .unavailable
            }
            // No refresh token (RFC 6749 §4.4.3): the client asks again with its secret.
            return try await issue(
                client: client, session: session, scope: Self.grantedScope(form["scope"]), nonce: "", issuer: issuer, now: now, refresh: nil,
                withRefresh: false
            )
        default:  // password (Direct Access Grants, as the DataSync showcase's getToken.js uses it)
            guard let userName = form["username"], !userName.isEmpty, let password = form["password"], !password.isEmpty else {
                throw .invalidRequest("username and password are required.")
            }
            let caller: Caller
            let proof: UserDirectory.CredentialProof
            do {
                (caller, proof) = try await identity.verify(userName: String(userName.prefix(256)), password: password, address: address)
            } catch {
                throw Failure.from(error) ?? .invalidGrant("Invalid user credentials.")
            }
            let session = OpenIDGrants.Session(
                sid: Base64URL.random(bytes: 16), userID: caller.userID, clientID: client.clientID, authTime: now,
                expires: Self.sessionExpiry(client, now: now), issuer: issuer
            )
            let scope = Self.grantedScope(form["scope"])
            let refresh = Base64URL.random(bytes: 32)
            do {
                try await OpenIDGrants.start(
                    session,
                    refresh: (OpenIDGrants.hash(refresh), .init(sid: session.sid, clientID: client.clientID, scope: scope, nonce: "", expires: session.expires)),
                    proof: proof, storage: storage
                )
            } catch is UserDirectory.CredentialEnded {
                // The password changed (or the account was locked) while it was checked.
                throw .invalidGrant("Invalid user credentials.")
            } catch {
                throw .unavailable
            }
            return try await issue(client: client, session: session, scope: scope, nonce: "", issuer: issuer, now: now, refresh: refresh)
        }
    }

    /// The scopes granted for a requested list: the known ones asked for (`openid` included when asked).
    static func grantedScope(_ requested: String?) -> String {
        let asked = (requested ?? "").split(separator: " ").map(String.init)
        var granted: [String] = []
        for scope in asked where scopes.contains(scope) && !granted.contains(scope) { granted.append(scope) }
        return granted.joined(separator: " ")
    }

    /// Signs the tokens of a grant, with `refresh` (stored already) or a new refresh token stored for the session.
    private func issue(
        client: OAuthDirectory.Client, session: OpenIDGrants.Session, scope: String, nonce: String, issuer requested: String, now: Int,
        refresh: String?, withRefresh: Bool = true
    ) async throws(Failure) -> JSONValue {
        // A session's tokens all name the issuer it began with (its access tokens are accepted with no other).
        let issuer = session.issuer ?? requested
        let caller: Caller?
        do { caller = try await authenticator.caller(userID: session.userID) } catch { throw .unavailable }
        guard let caller else { throw .invalidGrant("The user may no longer sign in.") }
        let profile: UserDirectory.Profile
        do { profile = try await UserDirectory(store: directory.store).profile(userID: caller.userID) } catch { throw .unavailable }
        let lifetime = max(1, min(client.accessLifespan, Self.maximumAccessLifetime))
        let expires = min(now + lifetime, session.expires)
        let access = AccessClaims(
            iss: issuer, sub: caller.userID, aud: Self.audience, azp: client.clientID, typ: "Bearer", exp: expires, iat: now,
            auth_time: session.authTime, jti: SysID.generate(), sid: session.sid, scope: scope, preferred_username: caller.userName,
            email: profile.email, name: profile.name, given_name: profile.givenName, family_name: profile.familyName,
            realm_access: .init(roles: caller.roles.sorted())
        )
        var refreshToken = refresh
        do {
            if refreshToken == nil, withRefresh {
                let made = Base64URL.random(bytes: 32)
                try await OpenIDGrants.add(
                    OpenIDGrants.hash(made), .init(sid: session.sid, clientID: client.clientID, scope: scope, nonce: nonce, expires: session.expires),
                    storage: storage
                )
                refreshToken = made
            }
            let accessToken = try await keys.sign(access, family: .rs256, now: now)
            var response: OrderedDictionary<String, JSONValue> = [
                "access_token": .string(accessToken), "token_type": .string("Bearer"), "expires_in": .integer(expires - now),
                "scope": .string(scope), "session_state": .string(session.sid), "not-before-policy": .integer(0),
            ]
            if let refreshToken {
                response["refresh_token"] = .string(refreshToken)
                response["refresh_expires_in"] = .integer(max(0, session.expires - now))
            }
            if scope.split(separator: " ").contains("openid") {
                let id = IDClaims(
                    iss: issuer, sub: caller.userID, aud: client.clientID, azp: client.clientID, typ: "ID", exp: expires, iat: now,
                    auth_time: session.authTime, nonce: nonce.isEmpty ? nil : nonce, at_hash: Self.atHash(accessToken), sid: session.sid,
                    preferred_username: caller.userName, email: profile.email, name: profile.name, given_name: profile.givenName,
                    family_name: profile.familyName
                )
                response["id_token"] = .string(try await keys.sign(id, family: .rs256, now: now))
            }
            return .object(response)
        } catch {
            throw .unavailable
        }
    }

    private static func sessionExpiry(_ client: OAuthDirectory.Client, now: Int) -> Int {
        now + max(60, client.refreshLifespan)
    }

    // MARK: What a token is

    /// The claims and session of an access token that holds now; nil for one that does not (forged, expired, of
    /// another issuer, its session ended). Throws when storage could not tell.
    func access(_ token: String, now: Int = SessionStore.now()) async throws -> (claims: AccessClaims, userID: String)? {
        guard token.utf8.count <= 8192 else { return nil }
        var claims = verifiedTokens.withLock { $0[token] }
        if claims == nil {
            guard let checked = try await keys.verify(token, as: AccessClaims.self, family: .rs256, now: now),
                checked.typ == "Bearer", checked.aud == Self.audience, checked.iss.hasSuffix("/realms/" + realm),
                publicIssuers.isEmpty || publicIssuers.contains(checked.iss)
            else { return nil }
            claims = checked
            verifiedTokens.withLock { cache in
                if cache.count >= Self.verifiedTokenMemory { cache = cache.filter { $0.value.exp > now } }
                if cache.count >= Self.verifiedTokenMemory { cache.removeAll(keepingCapacity: true) }
                cache[token] = checked
            }
        }
        guard let claims, claims.exp > now else { return nil }
        // The session's issuer exactly: a token minted under another address (a Host header's) is not this session's.
        guard let session = try await liveSession(claims.sid, now: now), session.userID == claims.sub,
            session.issuer.map({ $0 == claims.iss }) ?? true
        else { return nil }
        return (claims, session.userID)
    }

    /// The user and issuer of a live session; nil when it ended.
    private func liveSession(_ sid: String, now: Int) async throws -> (userID: String, issuer: String?)? {
        if !storage.isShared, let known = sessions.withLock({ $0[sid] }), known.expires > now { return (known.userID, known.issuer) }
        guard let session = try await OpenIDGrants.session(sid, now: now, storage: storage) else { return nil }
        if !storage.isShared {
            sessions.withLock { cache in
                if cache.count > 50_000 { cache = cache.filter { $0.value.expires > now } }
                cache[sid] = (session.userID, session.expires, session.issuer)
            }
        }
        return (session.userID, session.issuer)
    }

    /// The userinfo response for an access token's claims (OpenID Connect Core §5.3).
    static func userInfo(_ claims: AccessClaims) -> JSONValue {
        var info: OrderedDictionary<String, JSONValue> = ["sub": .string(claims.sub), "preferred_username": .string(claims.preferred_username)]
        if let name = claims.name { info["name"] = .string(name) }
        if let given = claims.given_name { info["given_name"] = .string(given) }
        if let family = claims.family_name { info["family_name"] = .string(family) }
        if let email = claims.email {
            info["email"] = .string(email)
            info["email_verified"] = .bool(false)
        }
        return .object(info)
    }

    /// RFC 7662: what a token is, for a confidential client that asks. Access tokens answer with their claims,
    /// refresh tokens with theirs; anything else (and a public client's question) is `{"active": false}`.
    func introspect(_ token: String, client: OAuthDirectory.Client) async throws(Failure) -> JSONValue {
        let now = SessionStore.now()
        do {
            if token.split(separator: ".", omittingEmptySubsequences: false).count == 3 {
                guard let (claims, _) = try await access(token, now: now) else { return .object(["active": .bool(false)]) }
                return .object([
                    "active": .bool(true), "token_type": .string("Bearer"), "client_id": .string(claims.azp),
                    "username": .string(claims.preferred_username), "sub": .string(claims.sub), "iss": .string(claims.iss),
                    "aud": .string(claims.aud), "azp": .string(claims.azp), "scope": .string(claims.scope), "exp": .integer(claims.exp),
                    "iat": .integer(claims.iat), "sid": .string(claims.sid), "jti": .string(claims.jti),
                    "realm_access": .object(["roles": .array(claims.realm_access.roles.map { .string($0) })]),
                ])
            }
            guard token.utf8.count <= 256, let (refresh, session) = try await OpenIDGrants.refresh(OpenIDGrants.hash(token), now: now, storage: storage)
            else { return .object(["active": .bool(false)]) }
            return .object([
                "active": .bool(true), "token_type": .string("Refresh"), "client_id": .string(refresh.clientID),
                "sub": .string(session.userID), "scope": .string(refresh.scope), "exp": .integer(refresh.expires), "sid": .string(session.sid),
            ])
        } catch {
            throw .unavailable
        }
    }

    /// RFC 7009: ends the session of an access or refresh token the client holds. Tokens that are not (another
    /// client's, unknown, expired) are ignored, as the RFC asks.
    func revoke(_ token: String, client: OAuthDirectory.Client) async throws(Failure) {
        let now = SessionStore.now()
        do {
            var sid: String?
            if token.split(separator: ".", omittingEmptySubsequences: false).count == 3 {
                if let (claims, _) = try await access(token, now: now), claims.azp == client.clientID { sid = claims.sid }
            } else if token.utf8.count <= 256, let (refresh, session) = try await OpenIDGrants.refresh(OpenIDGrants.hash(token), now: now, storage: storage),
                refresh.clientID == client.clientID
            {
                sid = session.sid
            }
            if let sid { try await end(sid: sid) }
        } catch {
            throw .unavailable
        }
    }

    /// The session an ID token names, for RP-initiated logout: its signature must hold (an expired one is still a
    /// hint, as OpenID RP-Initiated Logout §2 allows). Nil when it is not one of ours.
    func idTokenHint(_ token: String) async throws -> IDClaims? {
        guard token.utf8.count <= 8192, let claims = try await keys.verify(token, as: IDClaims.self, family: .rs256),
            claims.typ == "ID", claims.iss.hasSuffix("/realms/" + realm)
        else { return nil }
        return claims
    }

    /// Ends the session of a refresh token the client holds (the logout endpoint's form POST); false when it is
    /// not one.
    func logout(refreshToken token: String, client: OAuthDirectory.Client) async throws(Failure) -> Bool {
        do {
            guard token.utf8.count <= 256, let (refresh, session) = try await OpenIDGrants.refresh(OpenIDGrants.hash(token), now: SessionStore.now(), storage: storage),
                refresh.clientID == client.clientID
            else { return false }
            try await end(sid: session.sid)
            return true
        } catch {
            throw .unavailable
        }
    }

    /// Ends a session on every instance (storage), and here at once.
    func end(sid: String) async throws {
        try await OpenIDGrants.end(sid, storage: storage)
        forget(sid: sid)
    }

    /// Forgets a remembered session (nil: all of them, after a replay ended one whose id is not at hand).
    private func forget(sid: String?) {
        sessions.withLock { cache in
            if let sid { cache[sid] = nil } else { cache = [:] }
        }
    }

    /// Forgets remembered sessions of users whose credentials changed (the engine ended them in storage in the
    /// same commit).
    func observe(_ event: ChangeEvent) {
        if event.table == "sys_user",
            event.operation == .delete || event.fields.contains(where: UserDirectory.credentialFields.contains)
        {
            let user = event.sysID
            sessions.withLock { cache in cache = cache.filter { $0.value.userID != user } }
        }
    }

    // MARK: Discovery

    /// The discovery document (OpenID Connect Discovery 1.0 §3) of the realm at `issuer`.
    func discovery(issuer: String) -> JSONValue {
        let endpoints = issuer + "/protocol/openid-connect"
        func strings(_ values: [String]) -> JSONValue { .array(values.map { .string($0) }) }
        return .object([
            "issuer": .string(issuer),
            "authorization_endpoint": .string(endpoints + "/auth"),
            "token_endpoint": .string(endpoints + "/token"),
            "userinfo_endpoint": .string(endpoints + "/userinfo"),
            "jwks_uri": .string(endpoints + "/certs"),
            "end_session_endpoint": .string(endpoints + "/logout"),
            "revocation_endpoint": .string(endpoints + "/revoke"),
            "introspection_endpoint": .string(endpoints + "/token/introspect"),
            "device_authorization_endpoint": .string(endpoints + "/auth/device"),
            "response_types_supported": strings(["code"]),
            "response_modes_supported": strings(["query"]),
            "subject_types_supported": strings(["public"]),
            "id_token_signing_alg_values_supported": strings(["RS256"]),
            "token_endpoint_auth_methods_supported": strings(["client_secret_basic", "client_secret_post", "none"]),
            "revocation_endpoint_auth_methods_supported": strings(["client_secret_basic", "client_secret_post", "none"]),
            "introspection_endpoint_auth_methods_supported": strings(["client_secret_basic", "client_secret_post"]),
            "grant_types_supported": strings(Self.grantTypes),
            "code_challenge_methods_supported": strings(["S256"]),
            "scopes_supported": strings(Self.scopes),
            "claims_supported": strings([
                "iss", "sub", "aud", "azp", "exp", "iat", "auth_time", "nonce", "at_hash", "sid", "preferred_username", "name",
                "given_name", "family_name", "email", "email_verified",
            ]),
            "claims_parameter_supported": .bool(false),
            "request_parameter_supported": .bool(false),
            "request_uri_parameter_supported": .bool(false),
            "frontchannel_logout_supported": .bool(false),
            "backchannel_logout_supported": .bool(false),
        ])
    }
}
