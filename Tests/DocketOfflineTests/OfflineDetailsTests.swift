import DocketKit
import DocketModel
import DocketOffline
import DocketTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What an item's page needs offline: display values, the journal and the choice lists; the server's changes to a
/// record kept under the table it extends; and a server that never answers.
@Suite("Offline store: details")
struct OfflineDetailsTests {
    @Test("an opened item keeps its display values, journal and choice lists; offline a changed choice shows its label and a queued comment heads the journal", .timeLimit(.minutes(2)))
    func openedItem() async throws {
        try await withLiveServer { base in
            try await OfflineStoreTests.withStore(base) { store, _ in
                let john = try OfflineStoreTests.client(base)
                let admin = try OfflineStoreTests.client(base, "admin")
                _ = try await admin.table.updateRecord(Demo.incident1, in: "incident", with: ["comments": "an older comment"])
                let record = try await john.myWork.task(Demo.incident1, displayValue: .all)
                let journal = try await john.myWork.comments(for: Demo.incident1, limit: 20)
                #expect(try await store.keep(record, in: "task", journal: journal) == "task")
                let kept = try #require(try await store.details(Demo.incident1, in: "task"))
                #expect(kept.record.values["sys_class_name"] == "incident")
                #expect(kept.display("state") == record.displayValue("state") && kept.display("state") != record["state"])
                #expect(kept.display("assigned_to") == record.displayValue("assigned_to") && kept.display("assigned_to") != record["assigned_to"])
                #expect(kept.journal.first?.value == "an older comment" && kept.journal.first?.isPending == false)
                #expect(kept.journalFetchedAt != nil)
                // The choice lists of the record's class, in order.
                let states = try await store.choices(in: "incident", field: "state")
                #expect(states.contains(WorkChoice(value: "6", label: "Resolved")))
                #expect(try await store.choices(in: "incident", field: "no_such_field").isEmpty)

                // Changed here: the state shows the label of its new value; the comment waits at the top. A field of
                // the record's class that the task read did not hold (close_code) is not taken for a typo.
                #expect(record["close_code"] == nil)
                try await store.update(Demo.incident1, in: "task", values: ["state": "6", "close_code": "Known error"])
                try await store.comment(Demo.incident1, in: "task", text: "typed offline")
                let offline = try #require(try await store.details(Demo.incident1, in: "task"))
                #expect(offline.display("state") == "Resolved")
                #expect(offline.journal.first == OfflineJournalEntry(
                    element: "comments", value: "typed offline", createdOn: offline.journal.first?.createdOn ?? "", createdBy: "", isPending: true
                ))
                #expect(offline.journal.dropFirst().first?.value == "an older comment")
                #expect(offline.display("comments") == "")

                // Sent: the comment is the server's now, and arrives in the journal through the event log.
                let report = try await store.sync()
                #expect(report.sent == 2 && report.remaining == 0)
                let synced = try #require(try await store.details(Demo.incident1, in: "task"))
                #expect(synced.journal.filter { $0.value == "typed offline" }.map(\.isPending) == [false])
                #expect(synced.journal.first(where: { $0.value == "typed offline" })?.createdBy == "john.doe")
                #expect(synced.record.values["state"] == "6" && synced.display("state") == "Resolved")
                let server = try await admin.table.record(Demo.incident1, in: "incident")
                #expect(server["close_code"] == "Known error")
            }
        }
    }

    @Test("a record kept as a task (as My Work reads it) follows the server's changes, which name its class", .timeLimit(.minutes(2)))
    func keptUnderParentTable() async throws {
        try await withLiveServer { base in
            try await OfflineStoreTests.withStore(base) { store, _ in
                let admin = try OfflineStoreTests.client(base, "admin")
                #expect(try await store.refresh("task", query: .where("sys_id", .equals, Demo.incident1), limit: 10) == 1)
                _ = try await admin.table.updateRecord(Demo.incident1, in: "incident", with: ["short_description": "changed on the server"])
                let report = try await store.sync()
                #expect(report.applied >= 1)
                #expect(try await store.record(Demo.incident1, in: "task")?.values["short_description"] == "changed on the server")
                // Not held twice: the change was applied where the record is kept.
                #expect(try await store.record(Demo.incident1, in: "incident") == nil)
                _ = try await admin.table.deleteRecord(Demo.incident1, in: "incident")
                _ = try await store.sync()
                #expect(try await store.record(Demo.incident1, in: "task") == nil)
            }
        }
    }

    @Test("a server that accepts connections and never answers holds a sync for the store's request timeout, and loses nothing", .timeLimit(.minutes(1)))
    func hungServer() async throws {
        let hung = try SilentListener()
        defer { hung.close() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("docket-offline-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try OfflineStore(
            path: folder.appendingPathComponent("store.sqlite").path,
            client: try OfflineStoreTests.client("http://127.0.0.1:\(hung.port)"), requestTimeout: .milliseconds(500)
        )
        let id = try await store.create(in: "incident", values: ["short_description": "waits for an answer"])
        try await store.update(id, in: "incident", values: ["urgency": "2"])
        // The server never answers: only the request timeout can end the sync (the test's time limit bounds it), and
        // the report says so.
        let report = try await store.sync()
        #expect(report.unreachable?.contains("did not answer") == true && report.sent == 0 && report.remaining == 2)
        let operations = try await store.operations()
        #expect(operations.map(\.state) == [.queued, .queued] && operations.first?.attempts == 1)
        #expect(operations.first?.lastError?.contains("did not answer") == true)
        #expect(try await store.record(id, in: "incident")?.values["urgency"] == "2")
    }
}

/// A TCP port that accepts connections (the kernel completes them into the backlog) and never reads or answers.
final class SilentListener: Sendable {
    let socket: Int32
    let port: Int

    init() throws {
        #if canImport(Glibc)
        let descriptor = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw POSIXError(.EBADF) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(descriptor, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        socket = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() {
        #if canImport(Glibc)
        _ = Glibc.close(socket)
        #else
        _ = Darwin.close(socket)
        #endif
    }
}
