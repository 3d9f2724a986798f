import CryptoExtras
import DocketModel
import Foundation

/// The keys JSON Web Tokens are signed with, in `docket_signing_key`, where every instance sharing the database
/// reads them: an id (`kid`), an algorithm, the key material, and the moment from which it signs. Two families
/// live side by side, each rotating on its own: `HS512` keys (a shared secret) sign what only docketd reads back
/// (Compass login tokens), `RS256` keys (RSA, 2048 bits) sign what others verify with the public half that the
/// OpenID provider publishes (access and ID tokens). In each family the newest key whose moment has come signs;
/// every key verifies until the tokens it signed have expired.
///
/// Rotating adds a key to each family that signs from a little later (``publishLead``), so that every instance has
/// loaded (and published) it before any token names it; the key it replaces is kept for ``retention`` after that,
/// the lifetime of the longest-lived token it can have signed, and then removed.
enum SigningKeyStore {
    struct Key: Sendable, Equatable {
        var id: String
        var algorithm: String
        var material: [UInt8]
        /// Seconds since 1970 from which the key signs.
        var signsFrom: Int
    }

    /// A family of keys: the algorithm they sign with.
    enum Family: String, Sendable, CaseIterable {
        /// HMAC with SHA-512: tokens docketd alone reads (Compass's).
        case hs512 = "HS512"
        /// RSA PKCS#1 v1.5 with SHA-256: tokens others verify against the published keys (OpenID Connect's).
        case rs256 = "RS256"
    }

    /// How long before it signs a new key is in storage: instances load keys again at least this often.
    static let publishLead = 60
    /// How long a key is kept after a newer one took over: the longest lifetime of a token it signed (a Compass
    /// token's day; OpenID tokens are made to live no longer), and a margin.
    static let retention = CompassTokens.lifetime + 300
    /// The algorithm of the shared-secret keys (kept for callers that name one).
    static let algorithm = Family.hs512.rawValue

    static func createTable(_ db: SQLExecutor) async throws {
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_signing_key (kid TEXT PRIMARY KEY NOT NULL, alg TEXT NOT NULL, material TEXT NOT NULL, signs_from "
                + SQLFragment(db.dialect.integerType) + " NOT NULL)"
        )
    }

    /// Every key, oldest first. On a database without any, the instance secret (``SigningKey``, which signed the
    /// tokens issued before keys had ids) becomes the first HS512 key, signing from the beginning; a database
    /// without an RS256 key gets a new one, signing from the beginning too (no token can name it yet).
    static func load(_ storage: any Storage, secret: [UInt8]) async throws -> [Key] {
        if let keys = try await storage.read({ db in try await read(db) }), Family.allCases.allSatisfy({ family in
            keys.contains { $0.algorithm == family.rawValue }
        }) {
            return keys
        }
        // Made outside the transaction (generating an RSA key takes a while), used only if none is there.
        let fresh = try await newKey(.rs256, signsFrom: 0)
        return try await storage.write { db in
            // Two instances starting at once: the first inserts win, both read them back.
            try await db.run(
                "INSERT INTO docket_signing_key (kid, alg, material, signs_from) VALUES (" + .bind(TokenKeys.keyID(secret)) + ", "
                    + .bind(Family.hs512.rawValue) + ", " + .bind(Base64URL.encode(secret)) + ", 0) ON CONFLICT (kid) DO NOTHING"
            )
            if try await db.integer("SELECT COUNT(*) FROM docket_signing_key WHERE alg = " + .bind(Family.rs256.rawValue)) == 0 {
                try await insert(fresh, db)
            }
            return try await read(db) ?? []
        }
    }

    /// Adds a new random key to each family, signing from `now + lead`, and removes keys no token can need any
    /// more. Returns the new keys.
    @discardableResult
    static func rotate(
        _ storage: any Storage, secret: [UInt8], now: Int = SessionStore.now(), lead: Int = publishLead,
        families: [Family] = Family.allCases
    ) async throws -> [Key] {
        _ = try await load(storage, secret: secret)
        var keys: [Key] = []
        for family in families { keys.append(try await newKey(family, signsFrom: now + max(0, lead))) }
        let made = keys
        try await storage.write { db in
            for key in made { try await insert(key, db) }
            // A key whose successor in its family has signed for longer than the retention verifies nothing any more.
            let keys = try await read(db) ?? []
            for family in Family.allCases {
                let members = keys.filter { $0.algorithm == family.rawValue }
                for (index, old) in members.enumerated().dropLast() where members[index + 1].signsFrom + retention <= now {
                    try await db.run("DELETE FROM docket_signing_key WHERE kid = " + .bind(old.id))
                }
            }
        }
        return made
    }

    /// A new random key of a family. An RSA key is made on a thread of its own: finding its primes takes a tenth of
    /// a second to a second of a core, which would otherwise hold one of the few threads every task shares.
    static func newKey(_ family: Family, signsFrom: Int) async throws -> Key {
        switch family {
        case .hs512:
            var generator = SystemRandomNumberGenerator()
            let material = (0..<64).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            return Key(id: TokenKeys.keyID(material), algorithm: family.rawValue, material: material, signsFrom: signsFrom)
        case .rs256:
            let material = try await onThreadOfItsOwn { Array(try _RSA.Signing.PrivateKey(keySize: .bits2048).derRepresentation) }
            return Key(id: try TokenKeys.keyID(rsa: material), algorithm: family.rawValue, material: material, signsFrom: signsFrom)
        }
    }

    /// Runs `work` on a new thread and returns its result.
    private static func onThreadOfItsOwn<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
        }
    }

    private static func insert(_ key: Key, _ db: SQLExecutor) async throws {
        try await db.run(
            "INSERT INTO docket_signing_key (kid, alg, material, signs_from) VALUES (" + .bind(key.id) + ", "
                + .bind(key.algorithm) + ", " + .bind(Base64URL.encode(key.material)) + ", " + .bind(key.signsFrom) + ")"
        )
    }

    /// The keys in storage, oldest first; nil when the table is empty.
    private static func read(_ db: SQLExecutor) async throws -> [Key]? {
        var keys: [Key] = []
        for row in try await db.rows("SELECT kid, alg, material, signs_from FROM docket_signing_key ORDER BY signs_from, kid") {
            let id = try row.value(at: "kid", kind: .text).text ?? ""
            guard let algorithm = try row.value(at: "alg", kind: .text).text, Family(rawValue: algorithm) != nil,
                let text = try row.value(at: "material", kind: .text).text, let material = Base64URL.decode(text), material.count >= 32,
                let signsFrom = try row.value(at: "signs_from", kind: .integer).text.flatMap({ Int($0) })
            else { throw SigningKeyDamaged(id: id) }
            keys.append(Key(id: id, algorithm: algorithm, material: material, signsFrom: signsFrom))
        }
        return keys.isEmpty ? nil : keys
    }
}

/// A row of `docket_signing_key` that cannot be read as a key: refused loudly rather than skipped.
struct SigningKeyDamaged: Error, CustomStringConvertible {
    let id: String
    var description: String { "The signing key \(id) in docket_signing_key is damaged" }
}
