import Synchronization

/// The event numbers the write transaction the current task runs has drawn (added by the engine as each event is
/// appended, ``RecordStore/drew(_:)``), so that PostgreSQL's storage can tell the other instances as soon as they are
/// committed (``committed()``), or when the write has ended (``CommitAnnouncer``).
final class DrawnEvents: Sendable {
    private let drawn = Mutex<CommitAnnouncer.Announcement?>(nil)
    private let announce: (@Sendable (CommitAnnouncer.Announcement) -> Void)?

    /// `announce`: sends what was drawn once it is known to be committed (``committed()``).
    init(announce: (@Sendable (CommitAnnouncer.Announcement) -> Void)? = nil) { self.announce = announce }

    /// The numbers drawn so far are committed (a `COMMIT` answered, or a statement that ran on its own returned):
    /// announced at once, not when the write has finished its answer.
    func committed() {
        guard let announcement = drawn.withLock({ drawn in defer { drawn = nil }; return drawn }) else { return }
        announce?(announcement)
    }

    func add(_ sequence: Int) { drawn.withLock { $0 = $0.folding(.numbers([sequence])) } }

    /// An event was appended whose number the statement's answer did not carry (``CommittedWithoutAnswer``).
    func addUnnumbered() { drawn.withLock { $0 = $0.folding(.unnumbered) } }

    /// What is left to announce once the transaction has ended (drawn by a run that did not commit, or not yet
    /// announced); nil when nothing is.
    var announcement: CommitAnnouncer.Announcement? { drawn.withLock { $0 } }

    /// The numbers of the write the current task runs, where the storage keeps them.
    @TaskLocal static var current: DrawnEvents?
}

/// Tells the instances that listen on the schema's channel (``Storage/logSignals(ignoring:)``) that this one
/// committed events, after the commit, in a statement of its own: the append itself no longer notifies, because a
/// `NOTIFY` in a transaction makes PostgreSQL take one lock for the whole database cluster at its commit and hold it
/// until the commit is flushed, which lets one writer commit at a time (docs/performance.md, 2026-12-03).
///
/// One announcement is sent at a time. Those made while one is on its way are folded into the next, which lists
/// all their numbers (up to ``Announcement/maximumNumbers``; beyond, or with an event whose number is not known here,
/// an empty payload, which wakes every listener, this process's too). Every call is followed by a send that starts
/// after it (none is lost while the storage is open); a send that fails is logged by the caller's `failed`, and the
/// others' catch-up, which reads the log's head every second besides (``SharedChangesService``), finds the commit
/// anyway.
final class CommitAnnouncer: Sendable {
    /// What a notification says.
    enum Announcement: Sendable, Equatable {
        /// Events of these numbers, ascending (the payload lists them: a listener drops the notification only when
        /// it has every one of them already, ``Storage/logSignals(ignoring:)``).
        case numbers([Int])
        /// Events of which one's number is not known here, or more than ``maximumNumbers`` (an empty payload: every
        /// listener reads the log, this process's too).
        case unnumbered

        /// The most numbers one notification lists (PostgreSQL bounds a payload at 8,000 bytes).
        static let maximumNumbers = 64

        /// The payload of its notification: the numbers separated by commas, or nothing.
        var payload: String {
            switch self {
            case .numbers(let numbers): return numbers.map(String.init).joined(separator: ",")
            case .unnumbered: return ""
            }
        }

        /// The payload with the sender's id after a `;` (``PostgresPresence/id``), so that an instance tells its own
        /// notifications from another's also when they list no numbers.
        func payload(from sender: String) -> String { payload + ";" + sender }

        /// The sender's id a payload ends with (``payload(from:)``); nil when it names none.
        static func sender(of payload: String) -> String? {
            let parts = payload.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)
            return parts.count == 2 ? String(parts[1]) : nil
        }

        /// The numbers a payload lists (before its sender's id); nil for any other payload (which wakes a listener
        /// as an unnumbered one).
        static func numbers(in payload: String) -> [Int]? {
            let listed = payload.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let numbers = listed.split(separator: ",", omittingEmptySubsequences: false).map { Int($0) }
            guard !numbers.isEmpty, numbers.count <= maximumNumbers, numbers.allSatisfy({ $0 != nil }) else { return nil }
            return numbers.compactMap { $0 }
        }
    }

    private struct State {
        var pending: Announcement?
        var sending = false
    }

    private let state = Mutex(State())

    /// Sends `announcement` (at once, or folded into the one after the one on its way) with `send`.
    func announce(
        _ announcement: Announcement, send: @escaping @Sendable (Announcement) async throws -> Void,
        failed: @escaping @Sendable (any Error) -> Void
    ) {
        let start = state.withLock { state -> Bool in
            state.pending = state.pending.folding(announcement)
            guard !state.sending else { return false }
            state.sending = true
            return true
        }
        guard start else { return }
        let sending: @Sendable () async -> Void = {
            while let next = self.next() {
                do {
                    try await send(next)
                } catch {
                    failed(error)
                }
            }
        }
        // Starts on the caller's thread (no hop before the connection's lease, which is the first wait).
        if #available(macOS 26, iOS 26, *) {
            Task.immediate { await sending() }
        } else {
            Task { await sending() }
        }
    }

    /// What to send next; nil (and no longer sending) when nothing is waiting.
    private func next() -> Announcement? {
        state.withLock { state in
            guard let next = state.pending else {
                state.sending = false
                return nil
            }
            state.pending = nil
            return next
        }
    }
}

extension CommitAnnouncer.Announcement? {
    /// One announcement that says what both say: every number of both, or that a number is unknown (or that there
    /// are too many to list).
    func folding(_ other: CommitAnnouncer.Announcement) -> CommitAnnouncer.Announcement {
        switch (self, other) {
        case (.none, _): return other
        case (.numbers(let mine)?, .numbers(let theirs)):
            let all = Set(mine).union(theirs).sorted()
            return all.count <= CommitAnnouncer.Announcement.maximumNumbers ? .numbers(all) : .unnumbered
        default: return .unnumbered
        }
    }
}
