/// Checks again, for as long as a live stream or socket runs, that the credential it was opened with still holds.
struct CredentialCheck: Sendable {
    let identity: Identity
    var authenticator: Authenticator { identity.authenticator }
    var oauth: OAuthService { identity.oauth }

    /// The caller the credential stands for now; nil when it ended (logout, expiry, revocation, a new password,
    /// a lock or deactivation). Throws ``LoginFailure/unavailable`` when that could not be looked up: a stream
    /// then ends so that its client resumes later, never as if the credential had ended.
    func caller(for credential: PresentedCredential, as caller: Caller) async throws(LoginFailure) -> Caller? {
        do { return try await identity.recheck(credential, as: caller) } catch { throw error.loginFailure }
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
