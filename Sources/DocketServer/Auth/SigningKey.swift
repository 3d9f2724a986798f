import DocketModel
import Foundation

/// The secret an instance signs its tokens with (Compass's JWTs), kept in `docket_meta` so that every docketd
/// sharing the database signs and verifies with the same one. Made on first use: 64 random bytes.
enum SigningKey {
    static let metaKey = "token_signing_key"

    static func load(_ storage: any Storage) async throws -> [UInt8] {
        let fresh = Data((0..<64).map { _ in UInt8.random(in: .min ... .max) }).base64EncodedString()
        let stored = try await storage.write { db -> String? in
            // Two instances starting at once: the first insert wins, both read it back.
            try await db.run(
                "INSERT INTO docket_meta (key, value) VALUES (" + .bind(metaKey) + ", " + .bind(fresh)
                    + ") ON CONFLICT (key) DO NOTHING"
            )
            return try await db.rows("SELECT value FROM docket_meta WHERE key = " + .bind(metaKey)).first
                .flatMap { try $0.value(at: "value", kind: .text).text }
        }
        guard let stored, let bytes = Data(base64Encoded: stored), bytes.count >= 32 else {
            throw EngineError.badRequest("The token signing key in docket_meta is damaged")
        }
        return Array(bytes)
    }
}
