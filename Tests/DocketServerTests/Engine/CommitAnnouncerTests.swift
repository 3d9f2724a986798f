import Synchronization
import Testing

@testable import DocketServer

/// The announcements of this process's commits to other instances (``CommitAnnouncer``): one on its way at a time,
/// the ones made meanwhile folded into the next, which lists them all; none lost.
@Suite("Commit announcements")
struct CommitAnnouncerTests {
    /// Records what was sent; `hold` keeps each send waiting until released.
    final class Sends: Sendable {
        private let state = Mutex<(sent: [CommitAnnouncer.Announcement], held: Bool)>(([], false))
        func hold(_ held: Bool) { state.withLock { $0.held = held } }
        var sent: [CommitAnnouncer.Announcement] { state.withLock { $0.sent } }
        func send(_ announcement: CommitAnnouncer.Announcement) async throws {
            state.withLock { $0.sent.append(announcement) }
            while state.withLock({ $0.held }) { try await Task.sleep(for: .milliseconds(2)) }
        }
        func waitFor(count: Int) async throws {
            while sent.count < count { try await Task.sleep(for: .milliseconds(2)) }
        }
    }

    @Test("numbers announced while one is on its way are sent as one list; then nothing more", .timeLimit(.minutes(1)))
    func folds() async throws {
        let announcer = CommitAnnouncer()
        let sends = Sends()
        sends.hold(true)
        announcer.announce(.numbers([1]), send: sends.send, failed: { _ in Issue.record("no send fails") })
        try await sends.waitFor(count: 1)
        for sequence in [4, 2, 3] {
            announcer.announce(.numbers([sequence]), send: sends.send, failed: { _ in Issue.record("no send fails") })
        }
        sends.hold(false)
        try await sends.waitFor(count: 2)
        try await Task.sleep(for: .milliseconds(50))
        #expect(sends.sent == [.numbers([1]), .numbers([2, 3, 4])])
        // Idle again: the next announcement goes out on its own.
        announcer.announce(.numbers([5]), send: sends.send, failed: { _ in Issue.record("no send fails") })
        try await sends.waitFor(count: 3)
        #expect(sends.sent == [.numbers([1]), .numbers([2, 3, 4]), .numbers([5])])
    }

    @Test("folding lists every number; an unknown number or too many make an announcement without numbers")
    func folding() {
        typealias Announcement = CommitAnnouncer.Announcement
        let none: Announcement? = nil
        #expect(none.folding(.numbers([3])) == .numbers([3]))
        #expect(Optional(Announcement.numbers([7])).folding(.numbers([3])) == .numbers([3, 7]))
        #expect(Optional(Announcement.numbers([3, 7])).folding(.numbers([7])) == .numbers([3, 7]))
        #expect(Optional(Announcement.numbers([7])).folding(.unnumbered) == .unnumbered)
        #expect(Optional(Announcement.unnumbered).folding(.numbers([9])) == .unnumbered)
        let many = Announcement.numbers(Array(1...Announcement.maximumNumbers))
        #expect(Optional(many).folding(.numbers([1])) == many)
        #expect(Optional(many).folding(.numbers([100])) == .unnumbered)
        // The payload, and what a listener reads back from it.
        #expect(Announcement.numbers([3, 42]).payload == "3,42")
        #expect(Announcement.unnumbered.payload == "")
        #expect(Announcement.numbers(in: "42") == [42])
        #expect(Announcement.numbers(in: "3,42") == [3, 42])
        #expect(Announcement.numbers(in: many.payload) == Array(1...Announcement.maximumNumbers))
        // With the sender's id after a `;` (what PostgreSQL's storage sends): the numbers before it.
        #expect(Announcement.numbers([3, 42]).payload(from: "abc") == "3,42;abc")
        #expect(Announcement.numbers(in: "3,42;abc") == [3, 42])
        #expect(Announcement.sender(of: "3,42;abc") == "abc")
        #expect(Announcement.unnumbered.payload(from: "abc") == ";abc")
        #expect(Announcement.numbers(in: ";abc") == nil)
        #expect(Announcement.sender(of: ";abc") == "abc")
        #expect(Announcement.sender(of: "3,42") == nil)
        for unreadable in ["", "x", "1,,2", "1,", " 1", "1.2", ";1", String(repeating: "1,", count: 70) + "1"] {
            #expect(Announcement.numbers(in: unreadable) == nil, "\(unreadable)")
        }
        let drawn = DrawnEvents()
        #expect(drawn.announcement == nil)
        drawn.add(12)
        drawn.add(10)
        #expect(drawn.announcement == .numbers([10, 12]))
        drawn.addUnnumbered()
        #expect(drawn.announcement == .unnumbered)
    }

    @Test("numbers known to be committed are announced at once, and not again when the write ends")
    func committedAtOnce() {
        let sent = Mutex<[CommitAnnouncer.Announcement]>([])
        let drawn = DrawnEvents(announce: { announcement in sent.withLock { $0.append(announcement) } })
        drawn.committed()
        #expect(sent.withLock { $0 }.isEmpty, "nothing drawn, nothing sent")
        drawn.add(3)
        drawn.add(4)
        drawn.committed()
        #expect(sent.withLock { $0 } == [.numbers([3, 4])])
        #expect(drawn.announcement == nil, "nothing left for the end of the write")
        drawn.committed()
        drawn.add(9)
        #expect(sent.withLock { $0 } == [.numbers([3, 4])])
        #expect(drawn.announcement == .numbers([9]))
    }

    @Test("a send that fails is reported and the next announcement still goes out", .timeLimit(.minutes(1)))
    func failureDoesNotStop() async throws {
        struct Down: Error {}
        let announcer = CommitAnnouncer()
        let failures = Mutex(0)
        let sent = Mutex<[CommitAnnouncer.Announcement]>([])
        let send: @Sendable (CommitAnnouncer.Announcement) async throws -> Void = { announcement in
            sent.withLock { $0.append(announcement) }
            if announcement == .numbers([1]) { throw Down() }
        }
        announcer.announce(.numbers([1]), send: send, failed: { error in
            #expect(error is Down)
            failures.withLock { $0 += 1 }
        })
        while failures.withLock({ $0 }) == 0 { try await Task.sleep(for: .milliseconds(2)) }
        announcer.announce(.numbers([2]), send: send, failed: { _ in Issue.record("the second send does not fail") })
        while !sent.withLock({ $0.contains(.numbers([2])) }) { try await Task.sleep(for: .milliseconds(2)) }
        #expect(failures.withLock { $0 } == 1)
    }

    @Test("announcements from many tasks at once: every number is sent once, in fewer sends than calls, one send at a time", .timeLimit(.minutes(1)))
    func concurrent() async throws {
        let announcer = CommitAnnouncer()
        let sent = Mutex<(numbers: [Int], sends: Int, unnumbered: Bool)>(([], 0, false))
        let inFlight = Atomic<Int>(0)
        let send: @Sendable (CommitAnnouncer.Announcement) async throws -> Void = { announcement in
            #expect(inFlight.add(1, ordering: .relaxed).newValue == 1, "one send at a time")
            sent.withLock { sent in
                sent.sends += 1
                switch announcement {
                case .numbers(let numbers): sent.numbers += numbers
                case .unnumbered: sent.unnumbered = true
                }
            }
            try await Task.sleep(for: .milliseconds(1))
            inFlight.subtract(1, ordering: .relaxed)
        }
        await withTaskGroup(of: Void.self) { group in
            for sequence in 1...400 {
                group.addTask { announcer.announce(.numbers([sequence]), send: send, failed: { _ in }) }
            }
        }
        // Every call was made before this: each of its numbers goes out in a send that starts after it (or, past
        // 64 folded together, an announcement without numbers, which wakes every listener).
        while sent.withLock({ !$0.unnumbered && Set($0.numbers).count < 400 }) { try await Task.sleep(for: .milliseconds(2)) }
        try await Task.sleep(for: .milliseconds(50))
        let (numbers, sends, unnumbered) = sent.withLock { ($0.numbers, $0.sends, $0.unnumbered) }
        #expect(numbers.count == Set(numbers).count, "no number sent twice")
        if !unnumbered { #expect(Set(numbers) == Set(1...400)) }
        #expect(sends < 400)
    }
}
