import DocketModel
import Foundation

/// The device grant (RFC 8628): a device code to poll with, a user code a signed-in person enters in the web UI.
extension OpenIDProvider {

    /// Starts a device authorization for a client that may use the device grant: the device code (for the client
    /// to poll with) and the user code a person enters at `{issuer}/device`.
    func deviceAuthorization(form: [String: String], basic: (id: String, secret: String)?, issuer: String) async throws(Failure) -> JSONValue {
        let client = try await authenticateClient(form: form, basic: basic)
        guard client.grantTypes.contains(Self.deviceGrant) else { throw .unauthorizedClient("This client may not use the device grant.") }
        let now = SessionStore.now()
        let deviceCode = Base64URL.random(bytes: 32)
        let userCode = Self.newUserCode()
        do {
            try await OpenIDGrants.addDevice(
                OpenIDGrants.hash(deviceCode),
                .init(userCode: userCode, clientID: client.clientID, scope: Self.grantedScope(form["scope"]), expires: now + Self.deviceLifetime,
                      interval: Self.deviceInterval),
                storage: storage
            )
        } catch {
            throw .unavailable
        }
        let shown = Self.display(userCode)
        return .object([
            "device_code": .string(deviceCode), "user_code": .string(shown), "verification_uri": .string(issuer + "/device"),
            "verification_uri_complete": .string(issuer + "/device?user_code=" + shown), "expires_in": .integer(Self.deviceLifetime),
            "interval": .integer(Self.deviceInterval),
        ])
    }

    /// Letters people do not confuse and that spell no words (RFC 8628 §6.1): 20^8 codes.
    private static let userCodeLetters = Array("BCDFGHJKLMNPQRSTVWXZ")

    private static func newUserCode() -> String {
        var generator = SystemRandomNumberGenerator()
        return String((0..<8).map { _ in userCodeLetters[Int.random(in: 0..<userCodeLetters.count, using: &generator)] })
    }

    /// A user code as people read it: `WDJB-MJHT`.
    static func display(_ code: String) -> String { String(code.prefix(4)) + "-" + String(code.dropFirst(4)) }

    /// A user code as typed (any case, with or without the dash or spaces) as stored; nil when it cannot be one.
    static func normalized(userCode text: String) -> String? {
        let letters = text.uppercased().filter { $0.isLetter }
        guard letters.count == 8, letters.allSatisfy(userCodeLetters.contains) else { return nil }
        return letters
    }

    /// The name of the client waiting on a user code; nil when no such code is pending.
    func pendingDevice(userCode: String) async throws -> String? {
        guard let code = Self.normalized(userCode: userCode),
            let clientID = try await OpenIDGrants.pendingDevice(userCode: code, now: SessionStore.now(), storage: storage)
        else { return nil }
        let client = try await directory.client(clientID: clientID)
        return client.map { $0.name.isEmpty ? $0.clientID : $0.name } ?? clientID
    }

    /// What a person's decision on a user code came to.
    enum DeviceDecision: Sendable, Equatable {
        case decided
        /// No such code is pending (mistyped, expired, used).
        case unknown
        /// Too many unknown codes from this user lately (RFC 8628 §5.1): try again after the wait.
        case tooManyAttempts(retryAfter: Int)
        /// The web session the decision was made in has ended (a logout, a new password): sign in again.
        case signedOut
    }

    /// Unknown codes a user may enter within ``deviceAttemptWindow`` seconds before being held back (per instance).
    static let deviceAttempts = 10
    static let deviceAttemptWindow = 600

    /// A signed-in person's decision on a user code.
    func decideDevice(
        userCode: String, caller: Caller, approve: Bool, signIn: UserDirectory.CredentialProof.Parent? = nil,
        now: Int = SessionStore.now()
    ) async throws -> DeviceDecision {
        let held = deviceFailures.withLock { failures -> Int? in
            guard let entry = failures[caller.userID], now - entry.since < Self.deviceAttemptWindow, entry.count >= Self.deviceAttempts else {
                return nil
            }
            return entry.since + Self.deviceAttemptWindow - now
        }
        if let held { return .tooManyAttempts(retryAfter: max(1, held)) }
        let decided: Bool
        do {
            if let code = Self.normalized(userCode: userCode) {
                decided = try await OpenIDGrants.decide(
                    userCode: code, userID: caller.userID, approve: approve, proof: .init(userID: caller.userID, parent: signIn),
                    now: now, storage: storage
                )
            } else {
                decided = false
            }
        } catch is UserDirectory.CredentialEnded {
            return .signedOut
        }
        guard decided else {
            deviceFailures.withLock { failures in
                if failures.count > 10_000 { failures = failures.filter { now - $0.value.since < Self.deviceAttemptWindow } }
                var entry = failures[caller.userID] ?? (0, now)
                if now - entry.since >= Self.deviceAttemptWindow { entry = (0, now) }
                entry.count += 1
                failures[caller.userID] = entry
            }
            return .unknown
        }
        return .decided
    }
}
