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
        while finished.get == nil, ContinuousClock.now - started < .seconds(5) { try await Task.sleep(for: .milliseconds(10)) }
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
        let nudge = Nudge()
        let started = ContinuousClock.now
        let waiting = Task { await nudge.wait(upTo: .seconds(30)) }
        try await Task.sleep(for: .milliseconds(50))
        nudge.signal()
        await waiting.value
        nudge.signal()
        await nudge.wait(upTo: .seconds(30))
        #expect(ContinuousClock.now - started < .seconds(20))
    }
}
