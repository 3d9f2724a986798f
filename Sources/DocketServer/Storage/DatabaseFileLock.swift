import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Who has an SQLite database open, as the kernel's advisory locks (`flock(2)`) on `<database>-docketd-lock` tell:
/// every docketd that opens the database (serving it, or a command such as `docketd users`) holds the lock shared for
/// as long as it has the database open, and `docketd restore` takes it alone, so that a restore never replaces a
/// file under a running server (which would go on acknowledging writes into the file it replaced, lost at its next
/// start). The kernel releases the lock when its holder ends, however it ends (`kill -9` too).
final class DatabaseFileLock: Sendable {
    /// The lock file's descriptor; -1 once released.
    private let descriptor: Mutex<Int32>

    private init(descriptor: Int32) { self.descriptor = Mutex(descriptor) }

    deinit { release() }

    /// Lets the lock go (closing its descriptor); the kernel does the same when the process ends.
    func release() {
        let open = descriptor.withLock { descriptor -> Int32 in
            defer { descriptor = -1 }
            return descriptor
        }
        if open >= 0 { close(open) }
    }

    static func path(forDatabase database: String) -> String { database + "-docketd-lock" }

    enum Kind {
        /// The database is open here: shared with every other user of it.
        case using
        /// The database is being replaced: no one else may have it open.
        case replacing
    }

    /// Why a lock could not be had.
    enum Refusal: Error, Equatable {
        /// Another process holds it in a way that conflicts with `kind`.
        case held
        /// The lock file could not be opened or locked (the text says why).
        case failed(String)
    }

    /// Takes the lock of `database` as `kind`, without waiting.
    static func take(_ kind: Kind, database: String) -> Result<DatabaseFileLock, Refusal> {
        let path = path(forDatabase: database)
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            return .failure(.failed("\(path) could not be opened: \(String(cString: strerror(errno)))"))
        }
        let operation = (kind == .using ? LOCK_SH : LOCK_EX) | LOCK_NB
        while flock(descriptor, operation) != 0 {
            let error = errno
            if error == EINTR { continue }
            close(descriptor)
            if error == EWOULDBLOCK { return .failure(.held) }
            return .failure(.failed("\(path) could not be locked: \(String(cString: strerror(error)))"))
        }
        return .success(DatabaseFileLock(descriptor: descriptor))
    }
}
