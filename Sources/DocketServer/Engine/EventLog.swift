import DocketModel
import Foundation
import Synchronization

/// Fans committed changes out to followers of the event log. Fed once per commit, after it (by
/// ``RecordStore/notify(_:)``); with several server instances it will be fed from the database's
/// notifications as well, so followers never need to know where an event came from.
final class EventBroadcaster: Sendable {
    private let followers = Mutex<(next: Int, streams: [Int: AsyncStream<ChangeEvent>.Continuation])>((0, [:]))

    /// A stream of every event published from now on, and the token that ends it.
    func follow() -> (events: AsyncStream<ChangeEvent>, token: Int) {
        let (stream, continuation) = AsyncStream<ChangeEvent>.makeStream(bufferingPolicy: .unbounded)
        let token = followers.withLock { state in
            let token = state.next
            state.next += 1
            state.streams[token] = continuation
            return token
        }
        return (stream, token)
    }

    func stop(_ token: Int) {
        followers.withLock { $0.streams.removeValue(forKey: token) }?.finish()
    }

    func publish(_ event: ChangeEvent) {
        for continuation in followers.withLock({ Array($0.streams.values) }) { continuation.yield(event) }
    }

    /// How many followers there are (for tests and metrics).
    var count: Int { followers.withLock { $0.streams.count } }
}

/// Why a follower of the event log cannot continue from where it is.
enum EventLogError: Error, Sendable, Equatable {
    /// Events after the follower's sequence were removed by retention: it must read the current state again
    /// and follow from `oldestAvailable`. Never a silent gap.
    case resyncNeeded(oldestAvailable: Int)
}

extension RecordStore {
    /// The highest sequence removed by retention (0 when none was): a follower behind it cannot resume.
    func eventLogPrunedThrough() async throws -> Int {
        try await storage.read { db in
            Int(try await db.rows("SELECT value FROM docket_meta WHERE key = 'event_log_pruned_through'")
                .first?.value(at: "value", kind: .text).text ?? "") ?? 0
        }
    }

    /// Removes events older than `cutoff`, and all but the newest `maximumEvents`; returns how many went.
    /// Remembers the highest sequence removed, so that followers further behind are told to resync.
    @discardableResult
    func pruneEventLog(olderThan cutoff: Date, keepingAtMost maximumEvents: Int) async throws -> Int {
        let cutoffText = GlideDateTime.format(cutoff)
        return try await storage.write { db in
            let newest = try await db.integer("SELECT COALESCE(MAX(seq), 0) FROM docket_event_log")
            let condition: SQLFragment = "created_on < " + .bind(cutoffText) + " OR seq <= " + .bind(newest - max(0, maximumEvents))
            let through = try await db.integer("SELECT COALESCE(MAX(seq), 0) FROM docket_event_log WHERE " + condition)
            guard through > 0 else { return 0 }
            let removed = try await db.integer("SELECT COUNT(*) FROM docket_event_log WHERE seq <= " + .bind(through))
            try await db.run("DELETE FROM docket_event_log WHERE seq <= " + .bind(through))
            try await db.run("DELETE FROM docket_meta WHERE key = 'event_log_pruned_through'")
            try await db.run(
                "INSERT INTO docket_meta (key, value) VALUES ('event_log_pruned_through', " + .bind(String(through)) + ")"
            )
            return removed
        }
    }

    /// Every event after `sequence`, in order, each once: first those already in the log (replayed from
    /// storage), then live ones as they commit, with no gap and no duplicate at the seam.
    ///
    /// How the seam holds: the subscription starts following the broadcaster *before* it reads the log, so an
    /// event committed during the replay is either in what the replay read or in the followed stream (or both:
    /// then it is skipped by its sequence). A live event whose sequence is not the next one expected (events
    /// published out of order by concurrent commits) first has the missing ones read from the log. On SQLite
    /// one connection writes, so sequences commit in order and everything below a committed sequence is already
    /// readable. On PostgreSQL sequences can commit out of order; there the follower will read only up to the
    /// oldest transaction still in flight (`pg_snapshot_xmin`) before it trusts a gap to be final.
    ///
    /// Not yet filtered by the subscriber's read access: an internal API until the live transports use it.
    func subscribe(after sequence: Int, batchSize: Int = 500) -> AsyncThrowingStream<ChangeEvent, any Error> {
        let (live, token) = broadcaster.follow()
        let broadcaster = self.broadcaster
        return AsyncThrowingStream { continuation in
            let task = Task {
                var cursor = sequence
                do {
                    func catchUp(before limit: Int?) async throws {
                        let pruned = try await self.eventLogPrunedThrough()
                        if cursor < pruned { throw EventLogError.resyncNeeded(oldestAvailable: pruned) }
                        while true {
                            let batch = try await self.events(after: cursor, limit: batchSize)
                            for event in batch {
                                if let limit, event.sequence >= limit { return }
                                continuation.yield(event)
                                cursor = event.sequence
                            }
                            if batch.count < batchSize { return }
                        }
                    }
                    try await catchUp(before: nil)
                    for await event in live {
                        if event.sequence <= cursor { continue }
                        if event.sequence > cursor + 1 { try await catchUp(before: event.sequence) }
                        continuation.yield(event)
                        cursor = event.sequence
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in
                task.cancel()
                broadcaster.stop(token)
            }
        }
    }
}
