import DocketModel
import Foundation

/// The keys JSON Web Tokens are signed with, in `docket_signing_key`, where every instance sharing the database
/// reads them: an id (`kid`), an algorithm, the key material, and the moment from which it signs. The newest key
/// whose moment has come signs; every key verifies until the tokens it signed have expired.
///
/// Rotating adds a key that signs from a little later (``publishLead``), so that every instance has loaded it
/// before any token names it; the key it replaces is kept for ``retention`` after that, the lifetime of the
/// longest-lived token it can have signed, and then removed.
enum SigningKeyStore {
    struct Key: Sendable, Equatable {
        var id: String
        var algorithm: String
        var material: [UInt8]
        /// Seconds since 1970 from which the key signs.
        var signsFrom: Int
    }

    /// How long before it signs a new key is in storage: instances load keys again at least this often.
    static let publishLead = 60
    /// How long a key is kept after a newer one took over: the longest lifetime of a token it signed (a Compass
    /// token's day), and a margin.
    static let retention = CompassTokens.lifetime + 300
    /// The algorithm of the keys made here.
    static let algorithm = "HS512"

    static func createTable(_ db: SQLExecutor) async throws {
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_signing_key (kid TEXT PRIMARY KEY NOT NULL, alg TEXT NOT NULL, material TEXT NOT NULL, signs_from "
                + SQLFragment(db.dialect.integerType) + " NOT NULL)"
        )
    }

    /// Every key, oldest first. On a database without any, the instance secret (``SigningKey``, which signed the
    /// tokens issued before keys had ids) becomes the first key, signing from the beginning.
    static func load(_ storage: any Storage, secret: [UInt8]) async throws -> [Key] {
        if let keys = try await storage.read({ db in try await read(db) }), !keys.isEmpty { return keys }
        return try await storage.write { db in
            // Two instances starting at once: the first insert wins, both read it back.
            try await db.run(
                "INSERT INTO docket_signing_key (kid, alg, material, signs_from) VALUES (" + .bind(TokenKeys.keyID(secret)) + ", "
                    + .bind(algorithm) + ", " + .bind(Base64URL.encode(secret)) + ", 0) ON CONFLICT (kid) DO NOTHING"
            )
            return try await read(db) ?? []
        }
    }

    /// Adds a new random key that signs from `now + lead`, and removes keys no token can need any more. Returns
    /// the new key.
    @discardableResult
    static func rotate(_ storage: any Storage, secret: [UInt8], now: Int = SessionStore.now(), lead: Int = publishLead)
        async throws -> Key
    {
        _ = try await load(storage, secret: secret)
        var generator = SystemRandomNumberGenerator()
        let material = (0..<64).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let key = Key(id: TokenKeys.keyID(material), algorithm: algorithm, material: material, signsFrom: now + max(0, lead))
        try await storage.write { db in
            try await db.run(
                "INSERT INTO docket_signing_key (kid, alg, material, signs_from) VALUES (" + .bind(key.id) + ", "
                    + .bind(key.algorithm) + ", " + .bind(Base64URL.encode(key.material)) + ", " + .bind(key.signsFrom) + ")"
            )
            // A key whose successor has signed for longer than the retention verifies nothing any more.
            let keys = try await read(db) ?? []
            for (index, old) in keys.enumerated().dropLast() where keys[index + 1].signsFrom + retention <= now {
                try await db.run("DELETE FROM docket_signing_key WHERE kid = " + .bind(old.id))
            }
        }
        return key
    }

    /// The keys in storage, oldest first; nil when the table is empty.
    private static func read(_ db: SQLExecutor) async throws -> [Key]? {
        var keys: [Key] = []
        for row in try await db.rows("SELECT kid, alg, material, signs_from FROM docket_signing_key ORDER BY signs_from, kid") {
            let id = try row.value(at: "kid", kind: .text).text ?? ""
            guard let algorithm = try row.value(at: "alg", kind: .text).text, algorithm == Self.algorithm,
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
