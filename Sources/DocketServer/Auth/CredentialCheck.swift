/// Checks again, for as long as a live stream or socket runs, that the credential it was opened with still holds.
struct CredentialCheck: Sendable {
    let authenticator: Authenticator
    let oauth: OAuthService
    /// Compass tokens, when the server speaks Compass.
    var compass: CompassTokens? = nil

    /// The caller the credential stands for now; nil when it ended (logout, expiry, revocation, a new password,
    /// a lock or deactivation). Throws ``LoginFailure/unavailable`` when that could not be looked up: a stream
    /// then ends so that its client resumes later, never as if the credential had ended.
    func caller(for credential: PresentedCredential, as caller: Caller) async throws(LoginFailure) -> Caller? {
        switch credential {
        case .session(let token):
            return try await authenticator.caller(sessionToken: token)
        case .bearer(let token):
            guard let userID = try await oauth.userID(accessToken: token), userID == caller.userID else { return nil }
            return try await authenticator.caller(userID: userID)
        case .compass(let token):
            guard let compass else { return nil }
            let verified: (claims: CompassTokens.Claims, userID: String)?
            do { verified = try await compass.verify(token) } catch { throw .unavailable }
            guard let verified, verified.userID == caller.userID else { return nil }
            return try await authenticator.caller(userID: verified.userID)
        }
    }

    func watch() -> Watch {
        Watch(check: self, checkedAt: (authenticator.credentialGeneration, oauth.revocationGeneration))
    }

    /// One follower's view: the credential is looked up again when asked to (`force`: heartbeats catch expiry) and
    /// whenever a logout, a revocation or a change to users or roles happened since the last look; otherwise the
    /// caller still holds as it was.
    struct Watch: Sendable {
        let check: CredentialCheck
        var checkedAt: (Int, Int)

        mutating func caller(_ current: Caller, credential: PresentedCredential, force: Bool) async throws(LoginFailure)
            -> Caller?
        {
            let now = (check.authenticator.credentialGeneration, check.oauth.revocationGeneration)
            guard force || now != checkedAt else { return current }
            let caller = try await check.caller(for: credential, as: current)
            checkedAt = now
            return caller
        }
    }
}
