import Crypto
import DocketModel
import Foundation
import JWTKit
import Synchronization

/// The keys docketd signs its JSON Web Tokens with, as a key set (jwt-kit's `JWTKeyCollection`) loaded from
/// ``SigningKeyStore``: every token's header names its key (`kid`); the newest key whose moment has come signs, and
/// every key kept verifies, so keys rotate (`docketd keys rotate`) while tokens signed before stay good until they
/// expire. The first key is the instance secret that signed tokens before keys had ids; a token that names no key
/// is verified with it, for as long as it is kept.
///
/// Instances sharing a database see a rotation by loading the keys again: at least every ``reloadInterval``
/// (before signing), and when a token names a key they do not know (at most every ``unknownKeyReload``).
final class TokenKeys: Sendable {
    private struct State {
        var keys: [SigningKeyStore.Key]
        var collection: JWTKeyCollection
        var loadedAt: Int
        var unknownKeyLoadAt: Int?
    }

    /// Seconds after which keys are loaded again before signing (below ``SigningKeyStore/publishLead``).
    static let reloadInterval = 30
    /// Seconds between loads caused by tokens that name an unknown key (a forged `kid` cannot make every request
    /// read the database).
    static let unknownKeyReload = 5

    private let storage: (any Storage)?
    /// The instance secret, for what is not a JWT (sealed handles, CSRF tokens), each under a key of its own.
    let secret: [UInt8]
    private let state: Mutex<State>

    private init(storage: (any Storage)?, secret: [UInt8], keys: [SigningKeyStore.Key], collection: JWTKeyCollection, now: Int) {
        self.storage = storage
        self.secret = secret
        self.state = Mutex(State(keys: keys, collection: collection, loadedAt: now))
    }

    /// The key set in `storage` (made from `secret` on a database that has none).
    static func load(storage: any Storage, secret: [UInt8], now: Int = SessionStore.now()) async throws -> TokenKeys {
        let keys = try await SigningKeyStore.load(storage, secret: secret)
        guard !keys.isEmpty else { throw SigningKeyDamaged(id: "(none)") }
        return TokenKeys(storage: storage, secret: secret, keys: keys, collection: await collection(of: keys), now: now)
    }

    /// One key, made from `secret`, kept nowhere (tests, and tools that only verify).
    static func make(secret: [UInt8]) async -> TokenKeys {
        let keys = [SigningKeyStore.Key(id: keyID(secret), algorithm: SigningKeyStore.algorithm, material: secret, signsFrom: 0)]
        return TokenKeys(storage: nil, secret: secret, keys: keys, collection: await collection(of: keys), now: SessionStore.now())
    }

    /// A key's id: public, stable for the key, and telling nothing of it (an HMAC of a fixed label under it).
    static func keyID(_ material: [UInt8]) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Data("docket key id".utf8), using: SymmetricKey(data: material))
        return "hs512-" + Base64URL.encode(Array(code).prefix(9))
    }

    /// The keys as jwt-kit holds them: oldest first, so that the oldest is the default a token without `kid` meets.
    private static func collection(of keys: [SigningKeyStore.Key]) async -> JWTKeyCollection {
        let collection = JWTKeyCollection()
        for key in keys {
            await collection.add(hmac: HMACKey(from: key.material), digestAlgorithm: .sha512, kid: JWKIdentifier(string: key.id))
        }
        return collection
    }

    /// The keys known now, oldest first.
    var keys: [SigningKeyStore.Key] { state.withLock { $0.keys } }

    /// The key that signs at `now`: the newest whose moment has come.
    func current(now: Int = SessionStore.now()) -> SigningKeyStore.Key {
        let keys = self.keys
        return keys.last { $0.signsFrom <= now } ?? keys[0]
    }

    /// Signs `payload` with the key that signs now (HS512), its id in the header. Loads the keys again first when
    /// they were loaded more than ``reloadInterval`` ago (a failure to read them is thrown: no token is made).
    func sign(_ payload: some JWTPayload, now: Int = SessionStore.now()) async throws -> String {
        if state.withLock({ now.subtractingReportingOverflow($0.loadedAt).partialValue >= Self.reloadInterval }) {
            try await reload(now: now)
        }
        let key = current(now: now)
        let collection = state.withLock { $0.collection }
        return try await collection.sign(payload, kid: JWKIdentifier(string: key.id))
    }

    /// The payload of a token signed by one of the keys; nil when it is not one (malformed, another key, another
    /// algorithm, a payload of another shape). A token naming a key not known here has the keys loaded again
    /// first (another instance may have rotated); a failure to read them is thrown, never taken for "invalid".
    /// Checking claims such as the expiry is the payload's, and the caller's.
    func verify<Payload: JWTPayload>(_ token: String, as type: Payload.Type, now: Int = SessionStore.now()) async throws -> Payload? {
        guard token.utf8.count <= 8192 else { return nil }
        if let named = Self.keyID(of: token), storage != nil {
            let reload = state.withLock { state in
                guard !state.keys.contains(where: { $0.id == named }),
                    state.unknownKeyLoadAt.map({ now.subtractingReportingOverflow($0).partialValue >= Self.unknownKeyReload }) ?? true
                else {
                    return false
                }
                state.unknownKeyLoadAt = now
                return true
            }
            if reload { try await self.reload(now: now) }
        }
        let collection = state.withLock { $0.collection }
        do {
            return try await collection.verify(token, as: type)
        } catch {
            // Every failure here is the token's (the keys are in memory): it is simply not a valid token.
            return nil
        }
    }

    /// Loads the keys from storage again.
    func reload(now: Int = SessionStore.now()) async throws {
        guard let storage else { return }
        let keys = try await SigningKeyStore.load(storage, secret: secret)
        guard !keys.isEmpty else { throw SigningKeyDamaged(id: "(none)") }
        let collection = await Self.collection(of: keys)
        state.withLock { state in
            state.keys = keys
            state.collection = collection
            state.loadedAt = now
        }
    }

    /// The `kid` a token's header names; nil when it names none or is not a JWT.
    static func keyID(of token: String) -> String? {
        guard let header = token.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false).first,
            header.utf8.count <= 1024, let bytes = Base64URL.decode(header)
        else { return nil }
        do {
            return try JSONValue.parse(bytes)["kid"]?.stringValue
        } catch {
            // Not JSON: no key named (verification refuses the token).
            return nil
        }
    }
}
