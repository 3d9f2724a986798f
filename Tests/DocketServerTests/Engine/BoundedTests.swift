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
