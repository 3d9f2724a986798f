import HummingbirdBcrypt
import NIOPosix

/// bcrypt hashing and verification, run on the blocking thread pool so they never stall an event loop.
struct PasswordHasher: Sendable {
    /// The bcrypt cost (work factor); 12 in production, lower in tests.
    var cost: UInt8

    func hash(_ password: String) async -> String {
        let cost = self.cost
        return (try? await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) })
            ?? Bcrypt.hash(password, cost: cost)
    }

    func verify(_ password: String, hash: String) async -> Bool {
        guard hash.hasPrefix("$2") else { return false }
        return (try? await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: hash) }) ?? false
    }
}
