import DocketModel
import Foundation

/// Credentials that stand for an app or a machine, never a person, checked in one place like every credential
/// (through ``Identity``): a push variant's id and secret (which ship in every copy of the app: they prove which app
/// registers a device, nothing more), a push application's master secret (the UPS sender API: a bcrypt hash), and
/// the metrics token. Refusals are ``Identity/Refusal``s.
struct AppCredentials: Sendable {
    let store: RecordStore
    let hasher: PasswordHasher
    /// SHA-256 of `--metrics-token`, so that comparing takes the same time whatever the guess.
    let metricsTokenDigest: String?

    init(store: RecordStore, hasher: PasswordHasher, metricsToken: String?) {
        self.store = store
        self.hasher = hasher
        metricsTokenDigest = metricsToken.map { Digest.sha256Hex($0.utf8) }
    }

    /// A push variant (an app on one platform).
    struct PushVariant: Sendable, Equatable {
        var sysID: String
        var variantID: String
        var platform: String
        var application: String
    }

    /// The active variant whose id and secret these are.
    func pushVariant(id: String, secret: String) async throws(Identity.Refusal) -> PushVariant {
        guard !id.isEmpty, id.utf8.count <= 100 else { throw .rejected }
        let found: Record?
        do {
            found = try await store.list(
                RecordQuery(
                    table: "sys_push_variant", query: EncodedQuery(all: [QueryCondition("variant_id", .equals, id), QueryCondition("active", .equals, "true")]),
                    fields: ["sys_id", "variant_id", "variant_secret", "platform", "push_application"], limit: 1, count: false
                ),
                caller: .system
            ).records.first
        } catch {
            throw .unavailable
        }
        guard let found, Self.equal(found["variant_secret"], secret) else { throw .rejected }
        return PushVariant(sysID: found.sysID, variantID: found["variant_id"], platform: found["platform"], application: found["push_application"])
    }

    /// The push application (its sys_id) whose id and master secret these are.
    func pushApplication(id: String, masterSecret: String) async throws(Identity.Refusal) -> String {
        guard !id.isEmpty, id.utf8.count <= 100 else { throw .rejected }
        let found: (sysID: String, hash: String?)?
        do {
            found = try await store.storage.read { db in
                guard let row = try await db.rows(
                    "SELECT sys_id, master_secret FROM sys_push_application WHERE push_application_id = " + .bind(id) + " LIMIT 1"
                ).first, let sysID = try row.value(at: "sys_id", kind: .text).text else { return nil }
                return (sysID, try row.value(at: "master_secret", kind: .text).text.flatMap { $0.isEmpty ? nil : $0 })
            }
        } catch {
            throw .unavailable
        }
        let valid: Bool
        do {
            // An unknown application costs a bcrypt check too: the answer's time does not say which ids exist.
            if let hash = found?.hash { valid = try await hasher.verify(masterSecret, hash: hash) } else { try await hasher.verifyDecoy(masterSecret); valid = false }
        } catch {
            throw .busy
        }
        guard valid, let found else { throw .rejected }
        return found.sysID
    }

    /// Checks the metrics token (`Authorization: Bearer TOKEN` on `/metrics`); any passes when none is configured.
    func metrics(_ presented: String?) throws(Identity.Refusal) {
        guard let metricsTokenDigest else { return }
        guard let presented else { throw .missing }
        guard Self.equal(Digest.sha256Hex(presented.utf8), metricsTokenDigest) else { throw .invalidToken }
    }

    /// Compares secrets in constant time (for their length).
    static func equal(_ a: String, _ b: String) -> Bool {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        guard x.count == y.count, !x.isEmpty else { return false }
        return zip(x, y).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

extension Identity {
    /// The push variant of an app's registration credentials (UPS's Basic `variantId:variantSecret`).
    func pushVariant(id: String, secret: String) async throws(Refusal) -> AppCredentials.PushVariant {
        guard let apps else { throw .rejected }
        return try await apps.pushVariant(id: id, secret: secret)
    }

    /// The push application of the sender API's credentials (Basic `pushApplicationId:masterSecret`).
    func pushApplication(id: String, masterSecret: String) async throws(Refusal) -> String {
        guard let apps else { throw .rejected }
        return try await apps.pushApplication(id: id, masterSecret: masterSecret)
    }

    /// Checks a presented metrics token.
    func metrics(_ presented: String?) throws(Refusal) {
        guard let apps else { return }
        try apps.metrics(presented)
    }
}
