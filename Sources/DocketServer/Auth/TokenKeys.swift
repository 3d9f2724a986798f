import Crypto
import CryptoExtras
import DocketModel
import Foundation
import JWTKit
import Synchronization

/// The keys docketd signs its JSON Web Tokens with, as key sets (jwt-kit's `JWTKeyCollection`, one per family of
/// ``SigningKeyStore/Family``) loaded from ``SigningKeyStore``: every token's header names its key (`kid`); in each
/// family the newest key whose moment has come signs, and every key kept verifies, so keys rotate (`docketd keys
/// rotate`) while tokens signed before stay good until they expire. A token is only ever verified against the
/// family its kind is signed with, so a token of one kind is never taken for another. The first HS512 key is the
/// instance secret that signed tokens before keys had ids; a token that names no key is verified with it, for as
/// long as it is kept.
///
/// Instances sharing a database see a rotation by loading the keys again: at least every ``reloadInterval``
/// (before signing), and when a token names a key they do not know (at most every ``unknownKeyReload``).
final class TokenKeys: Sendable {
    private struct State {
        var keys: [SigningKeyStore.Key]
        var collections: [SigningKeyStore.Family: JWTKeyCollection]
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

    private init(
        storage: (any Storage)?, secret: [UInt8], keys: [SigningKeyStore.Key],
        collections: [SigningKeyStore.Family: JWTKeyCollection], now: Int
    ) {
        self.storage = storage
        self.secret = secret
        self.state = Mutex(State(keys: keys, collections: collections, loadedAt: now))
    }

    /// The key set in `storage` (made from `secret` on a database that has none).
    static func load(storage: any Storage, secret: [UInt8], now: Int = SessionStore.now()) async throws -> TokenKeys {
        let keys = try await SigningKeyStore.load(storage, secret: secret)
        return TokenKeys(storage: storage, secret: secret, keys: keys, collections: try await collections(of: keys), now: now)
    }

    /// One key per family, the HS512 one made from `secret`, kept nowhere (tests, and tools that only verify).
    static func make(secret: [UInt8]) async throws -> TokenKeys {
        let keys = [
            SigningKeyStore.Key(id: keyID(secret), algorithm: SigningKeyStore.algorithm, material: secret, signsFrom: 0),
            try await SigningKeyStore.newKey(.rs256, signsFrom: 0),
        ]
        return TokenKeys(storage: nil, secret: secret, keys: keys, collections: try await collections(of: keys), now: SessionStore.now())
    }

    /// A key's id: public, stable for the key, and telling nothing of it (an HMAC of a fixed label under it).
    static func keyID(_ material: [UInt8]) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Data("docket key id".utf8), using: SymmetricKey(data: material))
        return "hs512-" + Base64URL.encode(Array(code).prefix(9))
    }

    /// An RSA key's id: its RFC 7638 thumbprint (SHA-256 of the public key's canonical JWK), as relying parties
    /// may compute it themselves.
    static func keyID(rsa material: [UInt8]) throws -> String {
        let key = try _RSA.Signing.PrivateKey(derRepresentation: material)
        let (n, e) = try JWTKit.Insecure.RSA.PrivateKey(backing: key).publicKey.getKeyPrimitives()
        let canonical = #"{"e":""# + Base64URL.encode(Array(e)) + #"","kty":"RSA","n":""# + Base64URL.encode(Array(n)) + #""}"#
        return Base64URL.encode(Array(SHA256.hash(data: Data(canonical.utf8))))
    }

    /// The keys as jwt-kit holds them, one set per family: oldest first, so that the oldest is the default a token
    /// without `kid` meets. A key that cannot be read is refused loudly (``SigningKeyDamaged``).
    private static func collections(of keys: [SigningKeyStore.Key]) async throws -> [SigningKeyStore.Family: JWTKeyCollection] {
        var collections: [SigningKeyStore.Family: JWTKeyCollection] = [:]
        for family in SigningKeyStore.Family.allCases {
            let collection = JWTKeyCollection()
            let members = keys.filter { $0.algorithm == family.rawValue }
            guard !members.isEmpty else { throw SigningKeyDamaged(id: "(no \(family.rawValue) key)") }
            for key in members {
                switch family {
                case .hs512:
                    await collection.add(hmac: HMACKey(from: key.material), digestAlgorithm: .sha512, kid: JWKIdentifier(string: key.id))
                case .rs256:
                    let rsa: JWTKit.Insecure.RSA.PrivateKey
                    do {
                        rsa = try JWTKit.Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(derRepresentation: key.material))
                    } catch {
                        throw SigningKeyDamaged(id: key.id)
                    }
                    await collection.add(rsa: rsa, digestAlgorithm: .sha256, kid: JWKIdentifier(string: key.id))
                }
            }
            collections[family] = collection
        }
        return collections
    }

    /// The keys known now, oldest first.
    var keys: [SigningKeyStore.Key] { state.withLock { $0.keys } }

    /// The key of a family that signs at `now`: the newest whose moment has come.
    func current(_ family: SigningKeyStore.Family = .hs512, now: Int = SessionStore.now()) -> SigningKeyStore.Key {
        let keys = self.keys.filter { $0.algorithm == family.rawValue }
        return keys.last { $0.signsFrom <= now } ?? keys[0]
    }

    /// The public halves of the RS256 keys, as a JWK Set (RFC 7517): every key kept, those that do not sign yet
    /// included, so that a relying party knows a key before any token names it. Loads the keys again first when
    /// they were loaded more than ``reloadInterval`` ago.
    func publishedKeys(now: Int = SessionStore.now()) async throws -> JSONValue {
        try await reloadIfStale(now: now)
        var published: [JSONValue] = []
        for key in keys where key.algorithm == SigningKeyStore.Family.rs256.rawValue {
            let (n, e) = try JWTKit.Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(derRepresentation: key.material))
                .publicKey.getKeyPrimitives()
            published.append(.object([
                "kid": .string(key.id), "kty": .string("RSA"), "alg": .string("RS256"), "use": .string("sig"),
                "n": .string(Base64URL.encode(Array(n))), "e": .string(Base64URL.encode(Array(e))),
            ]))
        }
        return .object(["keys": .array(published)])
    }

    /// Signs `payload` with the key of `family` that signs now, its id in the header. Loads the keys again first
    /// when they were loaded more than ``reloadInterval`` ago (a failure to read them is thrown: no token is made).
    func sign(_ payload: some JWTPayload, family: SigningKeyStore.Family = .hs512, now: Int = SessionStore.now()) async throws -> String {
        try await reloadIfStale(now: now)
        let key = current(family, now: now)
        guard let collection = state.withLock({ $0.collections[family] }) else { throw SigningKeyDamaged(id: "(no \(family.rawValue) key)") }
        return try await collection.sign(payload, kid: JWKIdentifier(string: key.id))
    }

    private func reloadIfStale(now: Int) async throws {
        if state.withLock({ now.subtractingReportingOverflow($0.loadedAt).partialValue >= Self.reloadInterval }) {
            try await reload(now: now)
        }
    }

    /// The payload of a token signed by one of the keys; nil when it is not one (malformed, another key, another
    /// algorithm, a payload of another shape). A token naming a key not known here has the keys loaded again
    /// first (another instance may have rotated); a failure to read them is thrown, never taken for "invalid".
    /// Checking claims such as the expiry is the payload's, and the caller's.
    func verify<Payload: JWTPayload>(
        _ token: String, as type: Payload.Type, family: SigningKeyStore.Family = .hs512, now: Int = SessionStore.now()
    ) async throws -> Payload? {
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
        guard let collection = state.withLock({ $0.collections[family] }) else { return nil }
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
        let collections = try await Self.collections(of: keys)
        state.withLock { state in
            state.keys = keys
            state.collections = collections
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
