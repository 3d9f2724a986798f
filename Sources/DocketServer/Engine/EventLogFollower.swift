import DocketModel
import Foundation
import Synchronization

/// Follows the event log from after a sequence: replays what storage holds, then continues live.
///
/// How the seam holds: iteration starts following the broadcaster *before* it reads the log, so an event
/// committed during the replay is either in what the replay read or in the followed stream (or both: then it is
/// skipped by its sequence). A live event whose sequence is not the next one expected (events published out of
/// order by concurrent commits, or dropped from a follower's bounded buffer while it was slow) is held until the
/// missing ones come: live, when they are numbers this process drew for writes still under way (a write that fails
/// wakes the follower), or where the log is shared (PostgreSQL) when they come within a moment (``Iterator/gapGrace``);
/// otherwise they are read from the log. On SQLite one connection writes, so sequences commit in order and everything
/// below a committed sequence is already readable. On PostgreSQL writers commit in any order, so a read of the log
/// stops before a missing number that a transaction still in flight may commit, and the follower reads again after
/// a pause (1 ms, doubling to 50 ms) until that transaction commits or rolls back (``RecordStore/eventPage(after:limit:stoppingAtGaps:)``):
/// a number missing for good (a rollback) is passed, a pending one never.
///
/// Iteration is pulled: the log is read a batch at a time as the consumer asks, and the live buffer is bounded
/// (the newest events are kept; older ones are read back from the log), so a slow consumer costs memory for
/// one batch, never for the whole log. Ends with ``EventLogError/resyncNeeded(oldestAvailable:)`` when
/// retention removed events the follower had not seen, or when it starts further behind than
/// ``RecordStore/replayLimit`` events (a replay's cost is bounded; the follower reads the current state instead).
struct EventLogFollower: AsyncSequence, Sendable {
    typealias Element = ChangeEvent
    /// Live events a follower holds while it is busy before the oldest are dropped (and later read from the log).
    static let liveBuffer = 4_096

    let store: RecordStore
    let after: Int
    let batchSize: Int
    let liveBuffer: Int
    var replayLimited = true
    var kind: EventBroadcaster.FollowerKind = .live

    func makeAsyncIterator() -> Iterator {
        var iterator = Iterator(store: store, cursor: after, batchSize: batchSize, liveBuffer: liveBuffer, kind: kind)
        iterator.startChecked = !replayLimited
        return iterator
    }

    struct Iterator: AsyncIteratorProtocol {
        /// The followed broadcaster stream; stops following when the iteration is dropped.
        final class Following {
            let broadcaster: EventBroadcaster
            let token: Int
            var events: AsyncStream<EventBroadcaster.Signal>.Iterator
            let position: EventBroadcaster.Position

            init(_ broadcaster: EventBroadcaster, buffer: Int, position: EventBroadcaster.Position) {
                self.broadcaster = broadcaster
                self.position = position
                let (stream, token) = broadcaster.follow(buffer: buffer, position: position)
                self.token = token
                self.events = stream.makeAsyncIterator()
            }

            deinit { broadcaster.stop(token) }
        }

        let store: RecordStore
        /// The last sequence taken; the broadcaster's lag metrics read it.
        var cursor: Int { didSet { following.position.set(cursor) } }
        let batchSize: Int
        let following: Following
        var pending: [ChangeEvent] = []
        var pendingIndex = 0
        var replaying = true
        /// Live events come before the ones before them (writers commit in any order), oldest first: each waits
        /// until the events before it came live or were read from the log. At most ``heldLimit``.
        var held: [ChangeEvent] = []
        /// Beyond it, only the newest is held, and the log is read for those before it (``readsBeforeWaiting``).
        static let heldLimit = 256
        /// Live events were let go (``heldLimit``): the log is read for what is missing before the newest held,
        /// even where it is this process's own (a number let go may not be counted as published yet).
        var readsBeforeWaiting = false
        /// Where the log may be shared by several processes (PostgreSQL, also with one docketd), how long a number
        /// missing before a held event is waited for live before the log is read for it: the event of a write of this process comes as it commits, and catching up
        /// (``RecordStore/catchUp()``, before each request and on each notification) publishes other processes'
        /// events here as it reads them. At most one alarm's resolution later (``Alarms``).
        static let gapGrace = Duration.milliseconds(5)
        /// The gap waited for (the cursor it follows) and until when.
        var grace: (cursor: Int, until: ContinuousClock.Instant)?
        /// Whether the start was checked against the replay limit.
        var startChecked = false
        /// Pauses in a row while waiting for a number in flight (``pause()``).
        var pauses = 0
        /// The broadcaster's tick count when this follower last handed a tick on.
        var lastTick = 0

        /// Events read from the log that the iteration has not yielded yet (a replay judges them together).
        var upcoming: ArraySlice<ChangeEvent> { pending[pendingIndex...] }

        init(store: RecordStore, cursor: Int, batchSize: Int, liveBuffer: Int, kind: EventBroadcaster.FollowerKind = .live) {
            self.store = store
            self.cursor = cursor
            self.batchSize = batchSize
            // Read before following: a tick between the two is then handed on, never taken as already handed.
            self.lastTick = store.broadcaster.tickCount
            self.following = Following(store.broadcaster, buffer: liveBuffer, position: .init(kind: kind, at: cursor))
        }

        /// What following yields: an event, or a tick of the broadcaster's clock while waiting for one.
        enum Step: Sendable {
            case event(ChangeEvent)
            case tick
        }

        mutating func next() async throws -> ChangeEvent? {
            while let step = try await nextStep() {
                if case .event(let event) = step { return event }
            }
            return nil
        }

        /// The next event, or a tick when the broadcaster's clock ticks while the follower waits for live events.
        mutating func nextStep() async throws -> Step? {
            while true {
                if pendingIndex < pending.count {
                    let event = pending[pendingIndex]
                    pendingIndex += 1
                    if event.sequence <= cursor { continue }
                    cursor = event.sequence
                    return .event(event)
                }
                try Task.checkCancellation()
                if replaying {
                    if !startChecked {
                        startChecked = true
                        let latest = try await store.newestSequence()
                        // Ahead of the log: the client saw a database this one no longer is (restored from a
                        // backup, or another server's); the numbers it skipped are given again to new changes.
                        if cursor > latest || latest.subtractingReportingOverflow(cursor).partialValue > store.replayLimit {
                            throw EventLogError.resyncNeeded(oldestAvailable: try await store.latestSequence())
                        }
                    }
                    let page = try await read()
                    // A read that stopped before a number still in flight goes on reading (after a pause) rather than
                    // wait for live events: what committed after that number may have been published before this
                    // follower began, and would come live never.
                    replaying = page.events.count == batchSize || page.waiting
                    if page.waiting && page.events.isEmpty {
                        if try await pause() { return .tick }
                    } else {
                        pauses = 0
                    }
                    continue
                }
                if let event = held.first {
                    if event.sequence <= cursor {
                        held.removeFirst()
                        continue
                    } else if event.sequence == cursor + 1 {
                        held.removeFirst()
                        cursor = event.sequence
                        return .event(event)
                    } else if readsBeforeWaiting || !store.shared.drewAll(cursor + 1 ..< event.sequence), !waitsForGap() {
                        // Events before it are missing here: read from the log (they may still be in flight).
                        readsBeforeWaiting = false
                        let page = try await read()
                        if page.events.isEmpty {
                            if page.waiting {
                                if try await pause() { return .tick }
                            } else {
                                // Nothing committed in between: the numbers were skipped, not the events.
                                held.removeFirst()
                                cursor = event.sequence
                                return .event(event)
                            }
                        } else {
                            pauses = 0
                        }
                        continue
                    }
                    // The numbers missing before it were drawn by writes of this process still under way (their
                    // events come here live as they commit; a write that fails wakes followers instead), or may come
                    // live a moment later (``gapGrace``): the log is not read for them.
                }
                switch await following.events.next() {
                case nil: return nil
                case .tick:
                    // Ticks that came while this follower waited in the log were handed on then (``pause()``).
                    let ticks = store.broadcaster.tickCount
                    if ticks == lastTick { continue }
                    lastTick = ticks
                    return .tick
                case .wake: continue
                case .event(let event):
                    guard event.sequence > cursor else { continue }
                    // In order, once (the log and the live stream may both bring one).
                    let index = held.firstIndex { $0.sequence >= event.sequence } ?? held.endIndex
                    if index < held.endIndex, held[index].sequence == event.sequence { continue }
                    held.insert(event, at: index)
                    if held.count > Self.heldLimit {
                        held.removeFirst(held.count - 1)
                        readsBeforeWaiting = true
                    }
                }
            }
        }

        /// Whether to wait live a moment longer for the numbers missing after the cursor (``gapGrace``): the first
        /// time a gap after this cursor is seen, with an alarm that wakes this follower when the moment is over.
        private mutating func waitsForGap() -> Bool {
            guard store.storage.isShared, !readsBeforeWaiting else { return false }
            let now = ContinuousClock.now
            if let grace, grace.cursor == cursor { return now < grace.until }
            grace = (cursor, now + Self.gapGrace)
            let (broadcaster, token) = (following.broadcaster, following.token)
            _ = Alarms.shared.set(after: Self.gapGrace) { broadcaster.wake(token) }
            return true
        }

        /// Reads the next batch after the cursor into `pending`.
        private mutating func read() async throws -> RecordStore.EventPage {
            let pruned = try await store.eventLogPrunedThrough()
            if cursor < pruned { throw EventLogError.resyncNeeded(oldestAvailable: pruned) }
            let page = try await store.eventPage(after: cursor, limit: batchSize)
            pending = page.events
            pendingIndex = 0
            return page
        }

        /// Waits before reading again for a number still in flight: 1 ms, doubling to 50 ms while it lasts. Returns
        /// whether the broadcaster's clock ticked since this follower last handed a tick on (then it hands one on).
        private mutating func pause() async throws -> Bool {
            try await Task.sleep(for: .milliseconds(Swift.min(50, 1 << Swift.min(pauses, 6))))
            pauses += 1
            let ticks = store.broadcaster.tickCount
            guard ticks != lastTick else { return false }
            lastTick = ticks
            return true
        }
    }
}
