import Crypto
import OrderedCollections
import DocketModel
import Foundation
import Synchronization

/// ServiceNow's OAuth 2.0 authorization server (`/oauth_token.do`): the password and refresh_token grants
/// for clients registered in `oauth_entity`, and the bearer tokens they issue.
///
/// Tokens are random 256-bit strings; only their SHA-256 is stored, in `oauth_credential`, so they survive
/// a restart but a copy of the database does not hand them out. Validated access tokens are remembered in
/// memory until they expire (or are revoked), so a bearer request costs one dictionary lookup.
actor OAuthService: ChangeObserver {
    /// A successful grant, in the shape of ServiceNow's token response.
    struct Grant: Sendable {
        var accessToken: String
        /// Nil for a client_credentials grant (the client asks again with its secret).
        var refreshToken: String?
        var expiresIn: Int

        var json: JSONValue {
            var object: OrderedDictionary<String, JSONValue> = [
                "access_token": .string(accessToken), "scope": .string("useraccount"), "token_type": .string("Bearer"),
                "expires_in": .integer(expiresIn)]
            if let refreshToken { object["refresh_token"] = .string(refreshToken) }
            return .object(object)
        }
    }

    private let directory: OAuthDirectory
    let authenticator: Authenticator
    private let hasher: PasswordHasher
    private let key = Data(SysID.generate().utf8)
    /// Client secrets verified recently (keyed digest of id + secret), so token requests do not each pay bcrypt.
    /// A mutex rather than actor state, so that a change to `oauth_entity` clears it synchronously.
    private let verifiedClients = Mutex<[Data: (client: OAuthDirectory.Client, expires: Date)]>([:])
    /// Access tokens seen valid, in memory only: token → (user, expiry). Not consulted where other docketd share
    /// the database (a revocation there appends no event this process could follow).
    private var accessTokens: [String: (userID: String, expires: Date)] = [:]
    /// Users whose remembered tokens must go (see ``forgetTokens(ofUser:)``).
    private let endedUsers = Mutex<Set<String>>([])

    init(directory: OAuthDirectory, authenticator: Authenticator, hasher: PasswordHasher) {
        self.directory = directory
        self.authenticator = authenticator
        self.hasher = hasher
    }

    /// Runs a grant from the form fields of a token request; nil when anything is wrong (ServiceNow answers
    /// every failure alike). Client credentials come from the form or from HTTP Basic (RFC 6749 §2.3.1); a password
    /// grant's user name and password are checked by `verify` (``Identity/grant(form:basicClient:address:)``).
    /// Throws when the attempt could not be checked (throttled, password checking busy, storage down).
    func grant(
        form: [String: String], basicClient: (id: String, secret: String)?,
        verify: (String, String) async throws(LoginFailure) -> (caller: Caller, proof: UserDirectory.CredentialProof)
    ) async throws(LoginFailure) -> Grant? {
        let clientID = form["client_id"].flatMap { $0.isEmpty ? nil : $0 } ?? basicClient?.id
        let secret = form["client_secret"].flatMap { $0.isEmpty ? nil : $0 } ?? basicClient?.secret
        guard let clientID, let secret, let client = try await verifyClient(id: clientID, secret: secret) else {
            return nil
        }
        let now = Date()
        switch form["grant_type"] {
        case "password":
            guard let userName = form["username"], let password = form["password"] else { return nil }
            let caller: Caller
            let proof: UserDirectory.CredentialProof
            do {
                (caller, proof) = try await verify(userName, password)
            } catch .rejected {
                return nil
            }
            let access = Self.newToken()
            let refresh = Self.newToken()
            let refreshHash = Self.hash(refresh)
            let accessExpiry = now.addingTimeInterval(TimeInterval(client.accessLifespan))
            let tokens: [(String, OAuthDirectory.Token)] = [
                (refreshHash, .init(
                    type: "refresh_token", userID: caller.userID, clientID: client.sysID,
                    expires: GlideDateTime.format(now.addingTimeInterval(TimeInterval(client.refreshLifespan))),
                    refresh: ""
                )),
                (Self.hash(access), .init(
                    type: "access_token", userID: caller.userID, clientID: client.sysID,
                    expires: GlideDateTime.format(accessExpiry), refresh: refreshHash
                )),
            ]
            guard let issued = try await issue(tokens, now: now, proof: proof) else { return nil }
            remember(access, userID: caller.userID, expires: accessExpiry, issued: issued)
            return Grant(accessToken: access, refreshToken: refresh, expiresIn: Self.expiresIn(client))
        case "refresh_token":
            guard let refresh = form["refresh_token"], !refresh.isEmpty else { return nil }
            let refreshHash = Self.hash(refresh)
            let stored = try await unlessUnavailable { try await directory.token(hash: refreshHash) }
            guard let stored, stored.type == "refresh_token",
                stored.clientID == client.sysID, let expires = GlideDateTime.parse(stored.expires), expires > now,
                try await authenticator.caller(userID: stored.userID) != nil
            else { return nil }
            let access = Self.newToken()
            let accessExpiry = now.addingTimeInterval(TimeInterval(client.accessLifespan))
            let token = OAuthDirectory.Token(
                type: "access_token", userID: stored.userID, clientID: client.sysID,
                expires: GlideDateTime.format(accessExpiry), refresh: refreshHash
            )
            // A refresh token revoked (or ended by a new password) while this grant was checked issues nothing.
            guard let issued = try await issue(
                [(Self.hash(access), token)], now: now, proof: .init(userID: stored.userID, parent: .refreshToken(hash: refreshHash))
            ) else { return nil }
            remember(access, userID: stored.userID, expires: accessExpiry, issued: issued)
            return Grant(accessToken: access, refreshToken: refresh, expiresIn: Self.expiresIn(client))
        case "client_credentials":
            // A client acting as its application user (ServiceNow's inbound client credentials): only a
            // confidential client that lists the grant and names a user who may still sign in.
            guard !client.isPublic, client.grantTypes.contains("client_credentials") else { return nil }
            let account: UserDirectory.Account?
            do {
                account = try await OpenIDProvider.clientCredentialsAccount(of: client, users: UserDirectory(store: directory.store))
            } catch {
                throw .unavailable
            }
            guard let userID = account?.userID, try await authenticator.caller(userID: userID) != nil else { return nil }
            let access = Self.newToken()
            let accessExpiry = now.addingTimeInterval(TimeInterval(client.accessLifespan))
            let token = OAuthDirectory.Token(
                type: "access_token", userID: userID, clientID: client.sysID,
                expires: GlideDateTime.format(accessExpiry), refresh: ""
            )
            guard let issued = try await issue([(Self.hash(access), token)], now: now, proof: .init(userID: userID)) else {
                return nil
            }
            remember(access, userID: userID, expires: accessExpiry, issued: issued)
            return Grant(accessToken: access, refreshToken: nil, expiresIn: Self.expiresIn(client))
        default:
            // authorization_code and JWT bearer grants are not offered here (the OpenID provider has the code flow).
            return nil
        }
    }

    /// Stores issued tokens if what they rest on still holds (``OAuthDirectory/save(_:now:proof:)``): the
    /// count of revocations noted before they were stored, for ``remember(_:userID:expires:issued:)``; nil, storing
    /// nothing, when it no longer holds.
    private func issue(
        _ tokens: [(hash: String, token: OAuthDirectory.Token)], now: Date, proof: UserDirectory.CredentialProof
    ) async throws(LoginFailure) -> Int? {
        let generation = revocationGeneration
        let saved = try await unlessUnavailable { try await directory.save(tokens, now: GlideDateTime.format(now), proof: proof) }
        return saved ? generation : nil
    }

    /// Remembers an access token just issued, unless a revocation or a change to users happened since it began to
    /// be stored (one may have ended this very token after it was stored): then the database decides on its first use.
    private func remember(_ access: String, userID: String, expires: Date, issued: Int) {
        guard revocationGeneration == issued else { return }
        accessTokens[access] = (userID, expires)
    }

    /// The user an access token stands for; nil when it is unknown, expired or revoked. Throws
    /// ``LoginFailure/unavailable`` when the token could not be looked up: that is no answer about the token.
    func userID(accessToken: String) async throws(LoginFailure) -> String? {
        let ended = endedUsers.withLock { users in
            defer { users = [] }
            return users
        }
        if !ended.isEmpty { accessTokens = accessTokens.filter { !ended.contains($0.value.userID) } }
        let now = Date()
        // Where other docketd share the database, one of them may have revoked the token: the database decides.
        if let known = accessTokens[accessToken], !directory.store.storage.isShared {
            guard known.expires > now else {
                accessTokens[accessToken] = nil
                return nil
            }
            return known.userID
        }
        // A revocation that ends while the database is read must not find its token remembered afterwards.
        let generation = revocationGeneration
        let stored = try await unlessUnavailable { try await directory.token(hash: Self.hash(accessToken)) }
        guard let stored, stored.type == "access_token",
            let expires = GlideDateTime.parse(stored.expires), expires > now
        else { return nil }
        if revocationGeneration == generation { accessTokens[accessToken] = (stored.userID, expires) }
        if accessTokens.count > 50_000 { accessTokens = accessTokens.filter { $0.value.expires > now } }
        return stored.userID
    }

    /// Forgets the remembered access tokens of a user whose password, lock or active flag changed (the engine
    /// deleted their stored tokens in the same transaction). Synchronous: the next bearer request sees it.
    /// Forgets tokens of a user whose credentials changed (or who was deleted), and verified client secrets
    /// after a change to `oauth_entity`.
    nonisolated func observe(_ event: ChangeEvent) {
        if event.table == "sys_user",
            event.operation == .delete || event.fields.contains(where: UserDirectory.credentialFields.contains)
        {
            forgetTokens(ofUser: event.sysID)
        }
        if event.table == "oauth_entity" { invalidateClients() }
    }

    nonisolated func forgetTokens(ofUser userID: String) {
        endedUsers.withLock { _ = $0.insert(userID) }
        revocations.add(1, ordering: .releasing)
    }

    /// Forgets verified client secrets (after a change to `oauth_entity`: a new secret or a deactivated client
    /// takes effect at once).
    nonisolated func invalidateClients() {
        verifiedClients.withLock {
            clientChanges.add(1, ordering: .relaxed)
            $0 = [:]
        }
    }

    /// Counts changes to `oauth_entity` (moved under `verifiedClients`' lock): a client read before one is not
    /// remembered after it.
    private let clientChanges = Atomic<Int>(0)

    /// Counts revocations and credential changes (see ``Authenticator/credentialGeneration``). It moves only once
    /// the change has taken effect: whoever sees the new count and looks the token up again finds it gone (a
    /// WebSocket's ``SocketClock`` looks once per count).
    nonisolated var revocationGeneration: Int { revocations.load(ordering: .acquiring) }
    private let revocations = Atomic<Int>(0)

    /// Revokes an access or refresh token (and the access tokens issued with a refresh token).
    /// Throws ``LoginFailure/unavailable`` when the revocation could not be recorded: the token may still work.
    func revoke(token: String) async throws(LoginFailure) {
        let hash = Self.hash(token)
        try await unlessUnavailable { try await directory.revoke(hash: hash) }
        // Access tokens issued with a revoked refresh token are not tracked by refresh here: forget them all
        // and let the next request re-read the table.
        accessTokens = [:]
        revocations.add(1, ordering: .releasing)
    }

    func verifyClient(id: String, secret: String) async throws(LoginFailure) -> OAuthDirectory.Client? {
        var digest = SHA256()
        digest.update(data: key)
        digest.update(data: Data((id + "\u{0}" + secret).utf8))
        let keyed = Data(digest.finalize())
        let now = Date()
        let changes = verifiedClients.withLock { clients in
            (cached: clients[keyed], count: clientChanges.load(ordering: .relaxed))
        }
        if let cached = changes.cached, cached.expires > now { return cached.client }
        let stored: OAuthDirectory.Client?
        do {
            stored = try await directory.client(clientID: id)
        } catch {
            throw .unavailable
        }
        guard let client = stored, client.active else { return nil }
        do {
            guard try await hasher.verify(secret, hash: client.secretHash) else { return nil }
        } catch {
            throw .busy
        }
        // A client changed while it was read and checked (a new secret, a deactivation): not remembered past it.
        verifiedClients.withLock { clients in
            guard clientChanges.load(ordering: .relaxed) == changes.count else { return }
            clients[keyed] = (client, now.addingTimeInterval(60))
        }
        return client
    }

    /// Runs a lookup or write of the token tables; any failure of it is ``LoginFailure/unavailable``.
    private func unlessUnavailable<T: Sendable>(_ body: () async throws -> T) async throws(LoginFailure) -> T {
        do {
            return try await body()
        } catch {
            throw .unavailable
        }
    }

    /// ServiceNow reports a second less than the lifespan (1799 for 1800).
    private static func expiresIn(_ client: OAuthDirectory.Client) -> Int { max(1, client.accessLifespan - 1) }

    static func hash(_ token: String) -> String {
        Digest.sha256Hex(token.utf8)
    }

    private static func newToken() -> String { Base64URL.random(bytes: 32) }
}
