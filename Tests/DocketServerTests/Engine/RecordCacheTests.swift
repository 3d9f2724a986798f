import DocketModel
import Foundation
import Testing

@testable import DocketServer

@Suite("Record cache")
struct RecordCacheTests {
    @Test("a read after a write sees the write, through the table and its parent")
    func invalidation() async throws {
        try await TestApp.withStore { store in
            let id = DemoData.id("incident", 5)
            _ = try await store.get(id, in: "incident", caller: Callers.john)
            _ = try await store.get(id, in: "task", caller: Callers.john)
            try await store.update(id, in: "incident", values: ["short_description": "Changed"], caller: Callers.john)
            #expect(try await store.get(id, in: "incident", caller: Callers.john).record["short_description"] == "Changed")
            #expect(try await store.get(id, in: "task", caller: Callers.john).record["short_description"] == "Changed")
            try await store.delete(id, from: "task", caller: Callers.john)
            await #expect(throws: EngineError.notFound) { try await store.get(id, in: "incident", caller: Callers.john) }
        }
    }

    @Test("a row cached for an unrestricted reader is never served to a restricted one")
    func restrictedCallers() async throws {
        try await TestApp.withStore { store in
            let hidden = DemoData.id("incident", 3)
            _ = try await store.get(hidden, in: "incident", caller: Callers.admin)
            #expect(store.cache.entry(table: "task", sysID: hidden) != nil)
            await #expect(throws: EngineError.notFound) { try await store.get(hidden, in: "incident", caller: Callers.abel) }
        }
    }

    @Test("a cached child record is not served through a sibling table, and a parent view does not hide child fields")
    func classes() async throws {
        try await TestApp.withStore { store in
            let id = DemoData.id("incident", 6)
            _ = try await store.get(id, in: "task", caller: Callers.john)
            await #expect(throws: EngineError.notFound) { try await store.get(id, in: "problem", caller: Callers.john) }
            let (columns, record) = try await store.get(id, in: "incident", caller: Callers.john)
            #expect(columns.contains { $0.name == "caller_id" })
            #expect(record["caller_id"] == DemoData.userID("carol.coughlin"))
        }
    }

    @Test("a row read before a concurrent commit is not cached")
    func generation() {
        let cache = RecordCache()
        let stale = RecordCache.Entry(viewTable: "incident", record: Record(table: "incident", sysID: "a", values: ["x": "old"]))
        let generation = cache.generation
        cache.invalidate(table: "task", sysID: "a")
        cache.store(stale, physicalTable: "task", generation: generation)
        #expect(cache.entry(table: "task", sysID: "a") == nil)
    }
}
