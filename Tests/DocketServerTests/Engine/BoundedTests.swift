import Synchronization
import Testing

@testable import DocketServer

/// ``bounded(_:_:)``: a wait that ends at its limit even when what it waits for ignores cancellation.
@Suite("Bounded waits")
struct BoundedTests {
    /// Something that ends only when told to, whatever cancellation says (a driver's reply that never comes).
    final class Gate: Sendable {
        private let state = Mutex<(open: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

        func wait() async {
            await withCheckedContinuation { continuation in
                let open = state.withLock { state -> Bool in
                    if !state.open { state.waiting.append(continuation) }
                    return state.open
                }
                if open { continuation.resume() }
            }
        }

        func open() {
            for continuation in state.withLock({ state -> [CheckedContinuation<Void, Never>] in
                state.open = true
                defer { state.waiting = [] }
                return state.waiting
            }) { continuation.resume() }
        }
    }

    @Test("a body that finishes in time gives its value or its error")
    func inTime() async throws {
        #expect(try await bounded(.seconds(30)) { 42 } == 42)
        struct Failed: Error {}
        await #expect(throws: Failed.self) { _ = try await bounded(.seconds(30)) { () async throws -> Int in throw Failed() } }
    }

    @Test("a body that ignores cancellation and never ends: the caller gets nil at the limit, and the body ends when it can")
    func stuck() async throws {
        let gate = Gate()
        let ended = Mutex(false)
        let result = try await bounded(.milliseconds(50)) { () async -> Int in
            await gate.wait()
            ended.withLock { $0 = true }
            return 1
        }
        #expect(result == nil)
        #expect(!ended.withLock { $0 })
        gate.open()
        for _ in 0..<1_000 where !ended.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
        #expect(ended.withLock { $0 })
    }

    @Test("a cancelled caller gets CancellationError at once, while the body still waits")
    func cancelled() async throws {
        let gate = Gate()
        let caller = Task { try await bounded(.seconds(600)) { () async -> Int in
            await gate.wait()
            return 1
        } }
        caller.cancel()
        await #expect(throws: CancellationError.self) { _ = try await caller.value }
        gate.open()
    }
}

/// ``Alarms``: the deadlines of the request path, watched by one task.
@Suite("Alarms")
struct AlarmsTests {
    /// Waits (at most 10 s) until `condition` holds.
    private func eventually(_ condition: () -> Bool) async throws {
        for _ in 0..<2_000 where !condition() { try await Task.sleep(for: .milliseconds(5)) }
    }

    @Test("an alarm goes off once, not before its delay; one called off never does; the watch stops when none is set and starts again")
    func goesOffOnce() async throws {
        let alarms = Alarms(resolution: .milliseconds(5))
        let fired = Mutex<[String]>([])
        let start = ContinuousClock.now
        let firedAt = Mutex<ContinuousClock.Instant?>(nil)
        alarms.set(after: .milliseconds(60)) {
            firedAt.withLock { $0 = .now }
            fired.withLock { $0.append("kept") }
        }
        let off = alarms.set(after: .milliseconds(30)) { fired.withLock { $0.append("called off") } }
        #expect(alarms.cancel(off))
        #expect(!alarms.cancel(off))
        try await eventually { fired.withLock { $0.count } == 1 }
        #expect(fired.withLock { $0 } == ["kept"])
        #expect(try #require(firedAt.withLock { $0 }) - start >= .milliseconds(60))
        // With no alarm set the watch ends; the next alarm starts it again.
        try await eventually { !alarms.isWatching }
        #expect(!alarms.isWatching)
        let gone = alarms.set(after: .milliseconds(1)) { fired.withLock { $0.append("again") } }
        try await eventually { fired.withLock { $0.count } == 2 }
        // Once it went off, calling it off says so.
        #expect(!alarms.cancel(gone))
        try await Task.sleep(for: .milliseconds(50))
        #expect(fired.withLock { $0 } == ["kept", "again"])
    }

    @Test("alarms set and called off from many tasks at once: exactly those not called off go off, each once")
    func concurrent() async throws {
        let alarms = Alarms(resolution: .milliseconds(5))
        final class Counts: Sendable { let value = Mutex<[Int: Int]>([:]) }
        let box = Counts()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<400 {
                group.addTask {
                    let alarm = alarms.set(after: .milliseconds(index % 7 * 3)) { box.value.withLock { $0[index, default: 0] += 1 } }
                    if index % 2 == 0 {
                        // Called off in time (the delay is long) or found gone off (a delay of 0): never both.
                        if !alarms.cancel(alarm) { box.value.withLock { $0[index, default: 0] += 100 } }
                    }
                }
            }
        }
        // Every alarm not called off has gone off (its action ran, not only left the list); then a while for any to
        // go off twice.
        try await eventually { box.value.withLock { counts in (0..<400).allSatisfy { $0 % 2 == 0 || counts[$0] != nil } } }
        #expect(alarms.pending == 0)
        try await Task.sleep(for: .milliseconds(30))
        let seen = box.value.withLock { $0 }
        for index in 0..<400 {
            if index % 2 == 1 {
                #expect(seen[index] == 1, "alarm \(index) went off \(seen[index] ?? 0) times")
            } else {
                // Called off: it did not go off; or it had gone off before (then once, and cancel said so).
                #expect(seen[index] == nil || seen[index] == 101, "alarm \(index): \(seen[index] ?? 0)")
            }
        }
    }

    @Test("alarms due together go off in the order of their deadlines")
    func order() async throws {
        let alarms = Alarms(resolution: .milliseconds(100))
        let fired = Mutex<[Int]>([])
        // Deadlines from one instant, so their order does not depend on how fast they are set.
        let base = ContinuousClock.now
        for delay in [30, 10, 20] { alarms.set(at: base + .milliseconds(delay)) { fired.withLock { $0.append(delay) } } }
        try await eventually { fired.withLock { $0.count } == 3 }
        #expect(fired.withLock { $0 } == [10, 20, 30])
    }
}
