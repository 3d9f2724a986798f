import Hummingbird
import Logging
import ServiceLifecycle

/// Follows the database's notifications (each instance sends one after its writes commit,
/// ``PostgresStorage/announce(_:)``): each one makes the engine catch up, so that live streams here carry changes
/// written through other docketd at once; the log's head is also read every second, for a commit whose
/// announcement never came. Not run where only this process writes.
struct SharedChangesService: Service {
    let store: RecordStore
    let signals: AsyncStream<Void>
    let logger: Logger
    /// How often the log's head is read when no notification came.
    var pollInterval = Duration.seconds(1)

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                // The log's notifications, and numbers of this process's own writes handed back to the log
                // (``SharedChanges/handedBack``), whose notifications were dropped as its own.
                for stream in [signals, store.shared.handedBack] {
                    group.addTask { await follow(stream) }
                }
                // And every second: an instance that committed and stopped before it announced its commit
                // (``PostgresStorage/announce(_:)``), or an announcement that could not be sent, is heard this late.
                // Each second too, this process becomes alone if no other uses the database (``PostgresPresence``).
                group.addTask {
                    for await _ in Self.ticks(every: pollInterval) {
                        await follow(once: ())
                        if !store.storage.isAlone {
                            await store.storage.tryBeingAlone { try await store.catchUp() }
                        }
                    }
                }
            }
        }
    }

    /// Yields every `interval` until cancelled.
    static func ticks(every interval: Duration) -> AsyncStream<Void> {
        AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let task = Task {
                while true {
                    do {
                        try await Task.sleep(for: interval)
                    } catch {
                        break
                    }
                    continuation.yield()
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    private func follow(_ wakes: AsyncStream<Void>) async {
        for await _ in wakes { await follow(once: ()) }
    }

    /// Catches up once.
    private func follow(once: Void) async {
        do {
            try await store.catchUp()
        } catch is CancellationError {
        } catch is StorageUnavailable {
            // The storage logs an outage once; the poll would otherwise repeat it every second.
        } catch {
            logger.warning("Could not read other instances' changes", metadata: ["error": "\(error)"])
        }
    }
}

/// Brings the engine up to date with other instances' commits before a request is answered (see
/// ``RecordStore/catchUp()``): on a shared database, one indexed `MAX(seq)` read (``SharedRead``, shared by the
/// requests that arrive while the previous one runs; ``PostgresStorage/latestEventSequence()``) and, when another
/// instance committed since, a read of the log shared the same way (at most ``SharedChanges/readLimit``); nothing
/// on a database only this process writes (SQLite), or while this instance is alone on it (``PostgresPresence``).
struct SharedChangesResponder: HTTPResponder {
    typealias Context = DocketRequestContext
    let store: RecordStore
    let next: DialectResponder

    func respond(to request: Request, context: Context) async throws -> Response {
        do {
            try await store.catchUpBeforeRequest()
        } catch is StorageUnavailable {
            // The request itself meets the same storage and answers 503; the outage is logged once, by the storage.
        } catch {
            // The request itself will meet the same storage and answer for it; a failed catch-up is only logged.
            context.logger.warning("Could not read other instances' changes", metadata: ["error": "\(error)"])
        }
        return try await next.respond(to: request, context: context)
    }
}
