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
            if entries.count >= capacity {
                let sequences = entries.keys.map(\.sequence).sorted()
                let cutoff = sequences[sequences.count / 2]
                entries = entries.filter { $0.key.sequence > cutoff }
            }
            let task = Task { try await compute() }
            entries[key] = task
            return task
        }
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
