import Synchronization

/// A key of work done once per event of the log for everyone who asks alike.
protocol SequencedKey: Hashable, Sendable {
    /// The event sequence the work is about (older work is forgotten first).
    var sequence: Int { get }
}

/// Work shared by the live followers who ask alike: a thousand followers cost one computation per event, not a
/// thousand. Work in progress is awaited by the others rather than repeated. At `capacity` the older half is
/// forgotten (a follower far behind then computes again). Work that failed is forgotten as soon as it fails:
/// those who waited for it get its error, and the next to ask computes again (a database that was unavailable a
/// moment ago may answer now), instead of the failure being replayed to everyone with the key.
final class SharedWork<Key: SequencedKey, Value: Sendable>: Sendable {
    let capacity: Int
    private let state = Mutex<[Key: Task<Value, any Error>]>([:])

    init(capacity: Int) { self.capacity = capacity }

    func value(_ key: Key, compute: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let task = state.withLock { entries -> Task<Value, any Error> in
            if let existing = entries[key] { return existing }
            Self.makeRoom(in: &entries, capacity: capacity)
            let task = Task { try await compute() }
            entries[key] = task
            return task
        }
        return try await awaited(task, of: key)
    }

    /// The value of `key`, computed together with others that nobody has computed or started yet: one computation
    /// for all of them (one statement judging an event for many viewers), each of whom then finds theirs done.
    /// Only when `key` itself is still to be computed, `others` is asked for more keys, given which ones are still
    /// to be computed (it runs under this cache's lock: quick, and without touching the cache). `compute` is given
    /// the keys to compute, `key` first, and answers each (an error of one is that one's alone).
    func value(
        _ key: Key, alongside others: (_ isMissing: (Key) -> Bool) -> [Key],
        compute: @escaping @Sendable ([Key]) async throws -> [Key: Result<Value, any Error>]
    ) async throws -> Value {
        let task = state.withLock { entries -> Task<Value, any Error> in
            if let existing = entries[key] { return existing }
            Self.makeRoom(in: &entries, capacity: capacity)
            var keys = [key]
            var seen: Set<Key> = [key]
            for other in others({ entries[$0] == nil && $0 != key }) where entries[other] == nil && seen.insert(other).inserted {
                keys.append(other)
            }
            let shared = Task { [keys] in try await compute(keys) }
            for each in keys {
                entries[each] = Task {
                    guard let result = try await shared.value[each] else { throw SharedWorkUnanswered() }
                    return try result.get()
                }
            }
            return entries[key]!
        }
        return try await awaited(task, of: key)
    }

    private static func makeRoom(in entries: inout [Key: Task<Value, any Error>], capacity: Int) {
        guard entries.count >= capacity else { return }
        let sequences = entries.keys.map(\.sequence).sorted()
        let cutoff = sequences[sequences.count / 2]
        entries = entries.filter { $0.key.sequence > cutoff }
    }

    private func awaited(_ task: Task<Value, any Error>, of key: Key) async throws -> Value {
        do {
            return try await task.value
        } catch {
            // Only this very task is forgotten: another may have replaced it meanwhile.
            state.withLock { entries in
                if entries[key] == task { entries[key] = nil }
            }
            throw error
        }
    }
}

/// A computation of several keys together left one of them out (a bug: ``SharedWork/value(_:alongside:compute:)``
/// answers every key it is given).
struct SharedWorkUnanswered: Error {}
