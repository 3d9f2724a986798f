import Foundation
import Logging
import Testing

@testable import DocketServer

/// The mark the Table API's kept list pages follow (``RecordStore/changeMark()``); on PostgreSQL see
/// `SharedDatabaseTests` (a change committed while an older transaction is in flight).
@Suite("Change mark")
struct ChangeMarkTests {
    @Test("the change mark moves with a write of this process and with one another process makes to the same SQLite file")
    func followsOtherProcesses() async throws {
        try await TestApp.withStore { store in
            let first = try await store.changeMark()
            _ = try await store.insert(into: "incident", values: ["short_description": "here"], caller: Callers.admin)
            let second = try await store.changeMark()
            #expect(second != first)
            guard let sqlite = store.storage as? SQLiteStorage else { return }
            // `docketd users create` while the server runs: another engine on the same file.
            let other = try await SQLiteStorage.open(path: sqlite.path, readers: 1, logger: Logger(label: "other"))
            let hasher = PasswordHasher(cost: 4)
            let (elsewhere, _) = try await RecordStore.open(storage: other, logger: Logger(label: "other"), hashPassword: hasher.hash)
            _ = try await elsewhere.insert(into: "incident", values: ["short_description": "from another process"], caller: Callers.admin)
            #expect(try await store.changeMark() != second)
            try await other.close()
            await hasher.shutdown()
        }
    }
}
