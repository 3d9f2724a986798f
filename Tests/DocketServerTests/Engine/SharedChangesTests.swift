import Testing

@testable import DocketServer

/// What makes a request read the event log on a shared database (``SharedChanges/behind(_:)``): a number after
/// what was published that this process neither published nor drew for a write of its own still under way.
@Suite("Shared changes: when the log must be read")
struct SharedChangesTests {
    @Test("numbers this process drew for writes under way need no read; anyone else's does")
    func ownNumbers() {
        let shared = SharedChanges()
        shared.start(at: 10)
        #expect(!shared.behind(10))
        #expect(shared.behind(11))
        shared.drew(11)
        shared.drew(12)
        #expect(!shared.behind(12))
        // 13 is not this process's: another instance's commit, or one in flight there.
        #expect(shared.behind(13))
        // 12 commits first: 11 is still this process's own, in flight.
        shared.published(12)
        #expect(!shared.behind(12))
        #expect(shared.publishedUpTo == 10)
        shared.published(11)
        #expect(shared.publishedUpTo == 12)
        #expect(!shared.behind(12))
    }

    @Test("a commit's notification needs no catch-up for a number published here or drawn by a write under way")
    func accountedFor() {
        let shared = SharedChanges()
        shared.start(at: 10)
        #expect(shared.accountedFor(9))
        #expect(shared.accountedFor(10))
        #expect(!shared.accountedFor(11))
        shared.drew(11)
        shared.drew(13)
        #expect(shared.accountedFor(11))
        #expect(!shared.accountedFor(12))
        shared.published(13)
        #expect(shared.accountedFor(13))
        // A write that cannot say whether it committed hands its number back: the log must tell.
        shared.abandoned([11])
        #expect(!shared.accountedFor(11))
        // A number drawn longer ago than the window is no longer counted on.
        let stale = SharedChanges(ownWindow: .zero)
        stale.start(at: 10)
        stale.drew(11)
        #expect(!stale.accountedFor(11))
    }

    @Test("handing back a number this process drew wakes the catch-up; one it never drew or published does not", .timeLimit(.minutes(1)))
    func handedBack() async throws {
        let shared = SharedChanges()
        shared.start(at: 10)
        let wakes = SharedDatabaseTests.Box<Int>()
        wakes.set(0)
        let counting = Task {
            for await _ in shared.handedBack { wakes.set((wakes.current ?? 0) + 1) }
        }
        defer { counting.cancel() }
        shared.drew(11)
        shared.abandoned([11])
        while wakes.current == 0 { try await Task.sleep(for: .milliseconds(5)) }
        // Nothing of this process's left at 11, 12 never drawn, 13 published: no wake is owed.
        shared.drew(13)
        shared.published(13)
        shared.abandoned([11, 12, 13])
        try await Task.sleep(for: .milliseconds(100))
        #expect(wakes.current == 1)
        shared.drew(14)
        shared.abandoned([14])
        while wakes.current == 1 { try await Task.sleep(for: .milliseconds(5)) }
    }

    @Test("a number of a write that failed is the log's to tell again")
    func abandonedNumbers() {
        let shared = SharedChanges()
        shared.start(at: 10)
        shared.drew(11)
        shared.drew(12)
        shared.published(12)
        #expect(!shared.behind(12))
        shared.abandoned([11])
        // 11 may have rolled back or committed after all (a lost COMMIT): only the log can say.
        #expect(shared.behind(12))
        #expect(shared.publishedUpTo == 10)
    }

    @Test("a number published by a catch-up while this process still counts it as its own is counted once")
    func publishedByCatchUp() {
        let shared = SharedChanges()
        shared.start(at: 10)
        shared.drew(11)
        shared.drew(12)
        shared.published(12)
        // 12 is both published and (until the write's own publish clears it) drawn: 11 still in flight.
        shared.drew(12)
        #expect(!shared.behind(12))
        #expect(shared.behind(13))
    }

    @Test("a number drawn longer ago than the window hides nothing any more")
    func windowPassed() {
        let shared = SharedChanges(ownWindow: .zero)
        shared.start(at: 10)
        shared.drew(11)
        #expect(shared.behind(11))
        shared.published(11)
        #expect(!shared.behind(11))
        #expect(shared.publishedUpTo == 11)
    }

    @Test("a number published below the mark, or drawn before following began, changes nothing")
    func belowTheMark() {
        let shared = SharedChanges()
        shared.drew(5)
        shared.start(at: 10)
        shared.drew(9)
        shared.published(9)
        #expect(shared.publishedUpTo == 10)
        #expect(!shared.behind(10))
        #expect(shared.behind(11))
    }
}
