import Foundation
import Synchronization

/// The system properties (`sys_properties`) the engine itself obeys, read once and read again after any change
/// to the table (wherever it was written: another instance's changes arrive through ``RecordStore/catchUp()``).
final class InstanceProperties: ChangeObserver, Sendable {
    /// ServiceNow's `glide.invalid_query.returns_no_rows`: when `true`, a query with a term the instance cannot use
    /// (an unknown field or table, an unknown dynamic value) returns no rows instead of ignoring the term.
    static let invalidQueryReturnsNoRows = "glide.invalid_query.returns_no_rows"

    /// The properties read here.
    static let names = [invalidQueryReturnsNoRows]

    private let state = Mutex<(generation: Int, values: [String: String]?)>((0, nil))

    func observe(_ event: ChangeEvent) {
        guard event.table == "sys_properties" else { return }
        state.withLock { state in
            state.generation &+= 1
            state.values = nil
        }
    }

    /// A property's value, or nil when it is not set.
    func value(_ name: String, storage: any Storage) async throws -> String? {
        try await load(storage)[name]
    }

    /// Whether a property is `true` (as ServiceNow reads boolean properties: any case).
    func flag(_ name: String, storage: any Storage) async throws -> Bool {
        try await value(name, storage: storage)?.trimmingCharacters(in: .whitespaces).lowercased() == "true"
    }

    private func load(_ storage: any Storage) async throws -> [String: String] {
        let (generation, cached) = state.withLock { ($0.generation, $0.values) }
        if let cached { return cached }
        let rows = try await storage.read { db in
            try await db.rows(
                "SELECT name, value FROM sys_properties WHERE name IN (" + .bindList(Self.names) + ") ORDER BY sys_id"
            )
        }
        var values: [String: String] = [:]
        for row in rows {
            guard let name = try row.value(at: "name", kind: .text).text, values[name] == nil else { continue }
            values[name] = try row.value(at: "value", kind: .text).text ?? ""
        }
        // Kept only when no change came meanwhile: a read that began before it may have missed it.
        state.withLock { state in
            if state.generation == generation { state.values = values }
        }
        return values
    }
}
