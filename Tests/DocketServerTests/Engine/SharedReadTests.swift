import Synchronization
import Testing

@testable import DocketServer

/// The per-request read of the log's head on a shared database (``SharedRead``): callers that arrive together
/// share reads, and none gets a value read before it asked.
@Suite("Shared reads")
struct SharedReadTests {
    final class Source: Sendable {
        let reads = Atomic<Int>(0)
        /// Each read returns the number of reads started so far, after a pause.
        func read() async throws -> Int {
            let number = reads.add(1, ordering: .relaxed).newValue
            try await Task.sleep(for: .milliseconds(20))
            return number
        }
    }

    @Test("fifty callers at once cost a few reads, not fifty")
    func coalesces() async throws {
        let source = Source()
        let shared = SharedRead<Int>()
        let values = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<50 { group.addTask { try await shared.value { try await source.read() } } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(values.count == 50)
        #expect(source.reads.load(ordering: .relaxed) <= 3)
    }

    @Test("a caller that asks while a read runs gets the next read, never the running one")
    func neverStale() async throws {
        let source = Source()
        let shared = SharedRead<Int>()
        let first = Task { try await shared.value { try await source.read() } }
        // Wait until the first read has started, then ask.
        while source.reads.load(ordering: .relaxed) == 0 { await Task.yield() }
        let second = try await shared.value { try await source.read() }
        #expect(try await first.value == 1)
        #expect(second == 2)
    }
}
