import Testing

@testable import DocketOffline

@Suite("keepSynced's wait between syncs")
struct NudgeTests {
    /// The timer of a wait can run out before the wait begins (its task held up right after starting the timer, as
    /// on a busy machine): that wait must still end, not sit until a signal that may never come (keepSynced stalled
    /// so after a failed sync, until the next local write).
    @Test("a wait whose time ran out before it began returns at once", .timeLimit(.minutes(1)))
    func timeRanOutFirst() async throws {
        let nudge = Nudge(holdUp: .milliseconds(100))
        let finished = Box<Bool>()
        let waiting = Task {
            for _ in 0..<5 { await nudge.wait(upTo: .milliseconds(1)) }
            finished.set(true)
        }
        // Nothing signals: only the waits' own ends can finish them.
        let started = ContinuousClock.now
        while finished.get == nil, ContinuousClock.now - started < .seconds(30) { try await Task.sleep(for: .milliseconds(10)) }
        #expect(finished.get == true, "a wait was still waiting after its time had run out")
        // A stuck wait is released, so that the test ends.
        while finished.get == nil {
            nudge.signal()
            try await Task.sleep(for: .milliseconds(10))
        }
        await waiting.value
    }

    @Test("a signal ends a wait early, and a signal with nobody waiting ends the next wait at once", .timeLimit(.minutes(1)))
    func signals() async throws {
        // Waits of an hour: only the signals can end them within the test's time limit.
        let nudge = Nudge()
        let waiting = Task { await nudge.wait(upTo: .seconds(3600)) }
        try await Task.sleep(for: .milliseconds(50))
        nudge.signal()
        await waiting.value
        nudge.signal()
        await nudge.wait(upTo: .seconds(3600))
    }

    @Test("keepSynced's retries: doubling to a second while an outage is young, to thirty seconds once it lasted a minute, each drawn between half and all of it; an answer starts over")
    func retrySchedule() {
        var schedule = RetrySchedule(first: .milliseconds(100), maximum: .seconds(1), longest: .seconds(30))
        let start = ContinuousClock.now
        let young = (0..<6).map { _ in schedule.next(now: start, random: 1) }
        #expect(young == [.milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1), .seconds(1)])
        let old = (0..<8).map { _ in schedule.next(now: start + .seconds(61), random: 1) }
        #expect(old.last == .seconds(30) && old.first == .seconds(1) && old == old.sorted())
        #expect(schedule.next(now: start + .seconds(200), random: 0.5) == .seconds(15))
        // Jitter: two clients that failed together do not come back together.
        var a = RetrySchedule(first: .seconds(1), maximum: .seconds(1), longest: .seconds(30))
        let draws = Set((0..<20).map { _ in a.next(now: start) })
        #expect(draws.count > 1 && draws.allSatisfy { $0 >= .milliseconds(500) && $0 <= .seconds(1) })
        schedule.reset()
        #expect(schedule.next(now: start + .seconds(300), random: 1) == .milliseconds(100))
    }
}
