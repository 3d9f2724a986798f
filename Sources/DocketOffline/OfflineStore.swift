import DocketKit
import DocketModel
import Foundation
import GRDB
import Synchronization

/// An offline-first copy of the records a user works with, in one SQLite file per account.
///
/// Local writes (``create(in:values:)``, ``update(_:in:values:)``, ``comment(_:in:text:field:)``,
/// ``delete(_:in:)``) are one transaction each: the change is applied to the local record at once and appended to the
/// outbox, so nothing acknowledged is lost whatever happens to the process. ``sync()`` sends the outbox in order per
/// record, each operation with its own `Idempotency-Key` (sent again after a crash, it is never applied twice) and
/// `If-Match` of the version it was made on; then it catches up from the event log. A change the server made to a
/// field the user also changed is never settled silently: it becomes an ``OfflineConflict`` with the three values.
public final class OfflineStore: Sendable {
    let database: DatabasePool
    let client: DocketClient
    /// The file, for connections of its own (watching for other processes' commits).
    let path: String
    /// One ``sync()`` at a time.
    private let syncing = SyncGate()
    /// Wakes ``keepSynced(interval:retry:maximumRetry:onReport:)`` after a local write.
    let nudge = Nudge()

    /// How long one request of a ``sync()`` may take before the server counts as unreachable this time.
    let requestTimeout: Duration

    /// Opens (creating if needed) the store at `path` for the account `client` signs in as. Operations that were
    /// being sent when the process ended are queued again (their idempotency keys make that safe).
    ///
    /// `requestTimeout` bounds each request of a ``sync()``: a server that accepts connections and never answers
    /// holds the outbox that long (not for the transport's own timeout), and what was being sent is sent again later
    /// with the same idempotency key.
    public init(path: String, client: DocketClient, requestTimeout: Duration = .seconds(20)) throws {
        self.requestTimeout = requestTimeout
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        database = try DatabasePool(path: path, configuration: configuration)
        self.client = client
        self.path = path
        try Self.migrator.migrate(database)
        try database.write { db in
            try db.execute(sql: "UPDATE operation SET state = 'queued' WHERE state = 'sending'")
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE record (
                    table_name TEXT NOT NULL, sys_id TEXT NOT NULL, server TEXT NOT NULL, local TEXT NOT NULL,
                    version INTEGER, pending INTEGER NOT NULL DEFAULT 0, deleted INTEGER NOT NULL DEFAULT 0,
                    fetched_at REAL, PRIMARY KEY (table_name, sys_id));
                CREATE TABLE operation (
                    id INTEGER PRIMARY KEY AUTOINCREMENT, table_name TEXT NOT NULL, sys_id TEXT NOT NULL,
                    kind TEXT NOT NULL, field_values TEXT NOT NULL, base TEXT NOT NULL, base_version INTEGER,
                    idempotency_key TEXT NOT NULL, state TEXT NOT NULL, last_error TEXT,
                    attempts INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL);
                CREATE INDEX operation_record ON operation (table_name, sys_id, id);
                CREATE TABLE conflict (
                    operation_id INTEGER NOT NULL REFERENCES operation(id) ON DELETE CASCADE, field TEXT NOT NULL,
                    kind TEXT NOT NULL, base TEXT, mine TEXT, theirs TEXT, their_version INTEGER,
                    PRIMARY KEY (operation_id, field));
                CREATE TABLE tracked (table_name TEXT PRIMARY KEY NOT NULL);
                CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
                """)
        }
        migrator.registerMigration("v2-refresh-queries") { db in
            try db.execute(sql: """
                CREATE TABLE refresh_query (table_name TEXT NOT NULL, query TEXT NOT NULL, row_limit INTEGER NOT NULL,
                    PRIMARY KEY (table_name, query));
                """)
        }
        registerDetailMigrations(&migrator)
        return migrator
    }

    // MARK: Reading

    /// A record as the user sees it; nil when the store does not have it (or it was deleted here).
    public func record(_ sysID: String, in table: String) async throws -> OfflineRecord? {
        try await database.read { db in try Self.record(sysID, in: table, db: db) }
    }

    /// The records of a table the store holds, newest change first (deleted ones left out).
    public func records(in table: String) async throws -> [OfflineRecord] {
        try await database.read { db in try Self.records(in: table, db: db) }
    }

    /// A record, now and after every change to it (local or from the server, made by this process or by another on
    /// the same file, such as an app extension or the CLI), until the task is cancelled.
    public func observe(_ sysID: String, in table: String) -> AsyncThrowingStream<OfflineRecord?, any Error> {
        stream { db in try Self.record(sysID, in: table, db: db) }
    }

    /// A table's records, now and after every change.
    public func observeRecords(in table: String) -> AsyncThrowingStream<[OfflineRecord], any Error> {
        stream { db in try Self.records(in: table, db: db) }
    }

    /// How often a change committed by another process is looked for.
    static let otherProcessesPoll = Duration.milliseconds(200)

    /// GRDB's observation sees this process's commits at once; another process's are found by watching SQLite's
    /// `data_version` on a connection of the stream's own, which moves with every commit of any other connection.
    private func stream<Value: Sendable & Equatable>(_ fetch: @escaping @Sendable (Database) throws -> Value)
        -> AsyncThrowingStream<Value, any Error>
    {
        let values = ValueObservation.tracking(fetch).removeDuplicates().values(in: database)
        let (database, path) = (self.database, self.path)
        return AsyncThrowingStream { continuation in
            let last = Mutex<Value?>(nil)
            let send: @Sendable (Value) -> Void = { value in
                let changed = last.withLock { last -> Bool in
                    guard last != value else { return false }
                    last = value
                    return true
                }
                if changed { continuation.yield(value) }
            }
            let local = Task {
                do {
                    for try await value in values { send(value) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            let others = Task {
                do {
                    var configuration = Configuration()
                    configuration.readonly = true
                    let watcher = try DatabaseQueue(path: path, configuration: configuration)
                    var version = try await watcher.read { db in try Int.fetchOne(db, sql: "PRAGMA data_version") }
                    // GRDB's observation fetches again when told of a change: every value comes from it, in the
                    // order of the commits. Told once after the first look too, for a commit of another process
                    // between the observation's first fetch and that look. (Telling commits nothing, so it moves no
                    // other process's data_version.)
                    let tell = { try await database.write { db in try db.notifyChanges(in: .fullDatabase) } }
                    try await tell()
                    while !Task.isCancelled {
                        try await Task.sleep(for: Self.otherProcessesPoll)
                        let now = try await watcher.read { db in try Int.fetchOne(db, sql: "PRAGMA data_version") }
                        guard now != version else { continue }
                        version = now
                        try await tell()
                    }
                } catch is CancellationError {
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in
                local.cancel()
                others.cancel()
            }
        }
    }

    /// Operations waiting in the outbox, oldest first.
    public func operations() async throws -> [PendingOperation] {
        try await database.read { db in try Row.fetchAll(db, sql: "SELECT * FROM operation ORDER BY id").map(Self.operation) }
    }

    /// How many operations wait.
    public func pendingCount() async throws -> Int {
        try await database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM operation") ?? 0 }
    }

    /// Conflicts waiting for a decision.
    public func conflicts() async throws -> [OfflineConflict] {
        try await database.read { db in
            try Row.fetchAll(db, sql: """
                SELECT c.*, o.table_name, o.sys_id FROM conflict c JOIN operation o ON o.id = c.operation_id ORDER BY o.id, c.field
                """).map { row in
                let table: String = row["table_name"]
                let sysID: String = row["sys_id"]
                let number = try Self.record(sysID, in: table, db: db, includeDeleted: true)?.values["number"]
                return OfflineConflict(
                    operationID: row["operation_id"], table: table, sysID: sysID, number: number?.isEmpty == false ? number : nil,
                    kind: OfflineConflict.Kind(rawValue: row["kind"]) ?? .field, field: row["field"], base: row["base"],
                    mine: row["mine"], theirs: row["theirs"]
                )
            }
        }
    }

    // MARK: Writing here

    /// Creates a record here (its sys_id chosen here, so the server keeps it); returns the sys_id.
    @discardableResult
    public func create(in table: String, values: [String: String]) async throws -> String {
        let sysID = values["sys_id"].flatMap { $0.isEmpty ? nil : $0 } ?? Self.newID()
        var given = values
        given["sys_id"] = sysID
        let typed = given
        try await database.write { db in
            let fields = try Self.storedValues(typed, of: table, db: db)
            if try Row.fetchOne(db, sql: "SELECT 1 FROM record WHERE table_name = ? AND sys_id = ?", arguments: [table, sysID]) != nil {
                throw OfflineError.exists(table: table, sysID: sysID)
            }
            try db.execute(
                sql: "INSERT INTO record (table_name, sys_id, server, local, pending) VALUES (?, ?, '{}', '{}', 1)", arguments: [table, sysID]
            )
            try Self.enqueue(.create, table: table, sysID: sysID, values: fields, base: [:], baseVersion: nil, db: db)
            try Self.track(table, db: db)
            try Self.rebuild(table, sysID, db: db)
        }
        nudge.signal()
        return sysID
    }

    /// Changes fields of a record here.
    public func update(_ sysID: String, in table: String, values: [String: String]) async throws {
        guard !values.isEmpty else { return }
        try await database.write { db in
            guard let record = try Self.record(sysID, in: table, db: db) else { throw OfflineError.missing(table: table, sysID: sysID) }
            let recordClass = record.values["sys_class_name"].flatMap { $0.isEmpty ? nil : $0 } ?? table
            // A record read from the server through its own class holds every field its reader may see: a name it
            // lacks (a typo) is refused now, with the field meant, rather than queued for the server to ignore. One
            // kept as read through a table it extends (an incident read through `task`) holds only that table's
            // fields, so nothing is refused there.
            if !record.serverValues.isEmpty, record.table == recordClass {
                let known = Set(record.serverValues.keys).union(Self.journalFields)
                for field in values.keys.sorted() where !known.contains(field) {
                    throw OfflineError.unknownField(
                        table: recordClass, field: field, meant: Suggestions.closest(to: field, among: known, limit: 1).first
                    )
                }
            }
            let values = try Self.storedValues(values, of: recordClass, db: db)
            // The base of each field is what the user saw when changing it.
            let base = values.keys.reduce(into: [String: String]()) { $0[$1] = record.values[$1] ?? "" }
            try Self.enqueue(.update, table: table, sysID: sysID, values: values, base: base, baseVersion: record.version, db: db)
            // The new operation goes on top of what the user sees: no need to apply every pending one again.
            try db.execute(
                sql: "UPDATE record SET local = ?, pending = 1 WHERE table_name = ? AND sys_id = ?",
                arguments: [Self.encode(record.values.merging(values) { _, mine in mine }), table, sysID]
            )
        }
        nudge.signal()
    }

    /// Values as the instance stores them: a choice field's label (`In Progress`, any case) becomes its value (`2`),
    /// from the choice lists kept for `table` (the record's class), so that a change queued as a person types it is
    /// not refused when it is sent. A value that is neither a value nor a label of a kept list is refused now, with
    /// the list, rather than queued to fail later; fields without a kept list go as given.
    static func storedValues(_ values: [String: String], of table: String, db: Database) throws -> [String: String] {
        var stored = values
        for (field, given) in values where !given.isEmpty && field != "sys_id" {
            let list = try choices(in: table, field: field, db: db)
            guard !list.isEmpty, !list.contains(where: { $0.value == given }) else { continue }
            let typed = given.trimmingCharacters(in: .whitespaces)
            guard let choice = list.first(where: { $0.label.caseInsensitiveCompare(typed) == .orderedSame || $0.value == typed }) else {
                throw OfflineError.notAChoice(table: table, field: field, value: given, choices: list)
            }
            stored[field] = choice.value
        }
        return stored
    }

    /// Adds a comment (or work note, with `field: "work_notes"`) here.
    public func comment(_ sysID: String, in table: String, text: String, field: String = "comments") async throws {
        try await update(sysID, in: table, values: [field: text])
    }

    /// Deletes a record here.
    public func delete(_ sysID: String, in table: String) async throws {
        try await database.write { db in
            guard let record = try Self.record(sysID, in: table, db: db) else { throw OfflineError.missing(table: table, sysID: sysID) }
            try Self.enqueue(.delete, table: table, sysID: sysID, values: [:], base: [:], baseVersion: record.version, db: db)
            try Self.rebuild(table, sysID, db: db)
        }
        nudge.signal()
    }

    // MARK: Settling

    /// Settles one conflict of an operation. When its last conflict is settled the operation is queued again.
    public func resolve(_ conflict: OfflineConflict, with resolution: Resolution) async throws {
        defer { nudge.signal() }
        try await database.write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM operation WHERE id = ?", arguments: [conflict.operationID]) else {
                throw OfflineError.noSuchOperation(conflict.operationID)
            }
            var operation = Self.operation(row)
            let theirVersion = try Int.fetchOne(
                db, sql: "SELECT their_version FROM conflict WHERE operation_id = ? AND field = ?", arguments: [operation.id, conflict.field]
            )
            switch (conflict.kind, resolution) {
            case (.field, .mine):
                operation.base[conflict.field] = conflict.theirs ?? ""
            case (.field, .value(let value)):
                operation.values[conflict.field] = value
                operation.base[conflict.field] = conflict.theirs ?? ""
            case (.field, .theirs):
                operation.values[conflict.field] = nil
                operation.base[conflict.field] = nil
            case (.changedOnServer, .mine), (.changedOnServer, .value):
                break  // Delete the version the server has now.
            case (.changedOnServer, .theirs), (.deletedOnServer, .theirs):
                try db.execute(sql: "DELETE FROM operation WHERE id = ?", arguments: [operation.id])
                if conflict.kind == .deletedOnServer {
                    try Self.dropRecordIfSettled(operation.table, operation.sysID, db: db)
                }
                try Self.rebuild(operation.table, operation.sysID, db: db)
                return
            case (.deletedOnServer, .mine), (.deletedOnServer, .value):
                // Created again with what the user sees (a new record on the server, with the same sys_id).
                let local = try Self.record(operation.sysID, in: operation.table, db: db, includeDeleted: true)?.values ?? [:]
                var values = local.filter { !$0.key.hasPrefix("sys_") && !$0.value.isEmpty && $0.key != "number" }
                values["sys_id"] = operation.sysID
                try db.execute(
                    sql: "UPDATE operation SET kind = 'create', field_values = ?, base = '{}', base_version = NULL, idempotency_key = ? WHERE id = ?",
                    arguments: [Self.encode(values), Self.newID(), operation.id]
                )
                try db.execute(sql: "DELETE FROM conflict WHERE operation_id = ?", arguments: [operation.id])
                try db.execute(sql: "UPDATE operation SET state = 'queued', last_error = NULL WHERE id = ?", arguments: [operation.id])
                try Self.rebuild(operation.table, operation.sysID, db: db)
                return
            }
            if let theirVersion { operation.baseVersion = theirVersion }
            try db.execute(sql: "DELETE FROM conflict WHERE operation_id = ? AND field = ?", arguments: [operation.id, conflict.field])
            if operation.kind == .update, operation.values.isEmpty {
                try db.execute(sql: "DELETE FROM operation WHERE id = ?", arguments: [operation.id])
            } else {
                let open = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM conflict WHERE operation_id = ?", arguments: [operation.id]) ?? 0
                try db.execute(
                    sql: "UPDATE operation SET field_values = ?, base = ?, base_version = ?, state = ? WHERE id = ?",
                    arguments: [Self.encode(operation.values), Self.encode(operation.base), operation.baseVersion,
                                open == 0 ? "queued" : "conflict", operation.id]
                )
            }
            try Self.rebuild(operation.table, operation.sysID, db: db)
        }
    }

    /// Queues a failed operation again.
    public func retry(_ operationID: Int64) async throws {
        try await database.write { db in
            try db.execute(sql: "UPDATE operation SET state = 'queued' WHERE id = ? AND state = 'failed'", arguments: [operationID])
        }
        nudge.signal()
    }

    /// Drops an operation (failed, in conflict or waiting): the record shows the server's values again.
    public func discard(_ operationID: Int64) async throws {
        try await database.write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM operation WHERE id = ?", arguments: [operationID]) else { return }
            let operation = Self.operation(row)
            try db.execute(sql: "DELETE FROM operation WHERE id = ?", arguments: [operationID])
            try Self.dropRecordIfSettled(operation.table, operation.sysID, db: db)
            try Self.rebuild(operation.table, operation.sysID, db: db)
        }
    }

    // MARK: Internals shared with syncing

    static func newID() -> String {
        (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    static func enqueue(
        _ kind: PendingOperation.Kind, table: String, sysID: String, values: [String: String], base: [String: String],
        baseVersion: Int?, db: Database
    ) throws {
        try db.execute(
            sql: """
                INSERT INTO operation (table_name, sys_id, kind, field_values, base, base_version, idempotency_key, state, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?)
                """,
            arguments: [table, sysID, kind.rawValue, encode(values), encode(base), baseVersion, newID(), Date().timeIntervalSince1970]
        )
    }

    static func track(_ table: String, db: Database) throws {
        try db.execute(sql: "INSERT OR IGNORE INTO tracked (table_name) VALUES (?)", arguments: [table])
    }

    /// A record created here that the server never had, and that no operation concerns any more, is dropped.
    static func dropRecordIfSettled(_ table: String, _ sysID: String, db: Database) throws {
        let pending = try Int.fetchOne(
            db, sql: "SELECT COUNT(*) FROM operation WHERE table_name = ? AND sys_id = ?", arguments: [table, sysID]
        ) ?? 0
        guard pending == 0 else { return }
        try db.execute(sql: "DELETE FROM record WHERE table_name = ? AND sys_id = ? AND server = '{}'", arguments: [table, sysID])
    }

    /// Works out what the user sees: the server's values, then every operation's, in order.
    static func rebuild(_ table: String, _ sysID: String, db: Database) throws {
        guard let row = try Row.fetchOne(
            db, sql: "SELECT server FROM record WHERE table_name = ? AND sys_id = ?", arguments: [table, sysID]
        ) else { return }
        var local = decode(row["server"])
        var deleted = false
        let operations = try Row.fetchAll(
            db, sql: "SELECT * FROM operation WHERE table_name = ? AND sys_id = ? ORDER BY id", arguments: [table, sysID]
        ).map(operation)
        for operation in operations {
            switch operation.kind {
            case .create, .update: local.merge(operation.values) { _, mine in mine }
            case .delete: deleted = true
            }
        }
        try db.execute(
            sql: "UPDATE record SET local = ?, pending = ?, deleted = ? WHERE table_name = ? AND sys_id = ?",
            arguments: [encode(local), operations.isEmpty ? 0 : 1, deleted ? 1 : 0, table, sysID]
        )
    }

    static func record(_ sysID: String, in table: String, db: Database, includeDeleted: Bool = false) throws -> OfflineRecord? {
        guard let row = try Row.fetchOne(
            db, sql: "SELECT * FROM record WHERE table_name = ? AND sys_id = ?", arguments: [table, sysID]
        ) else { return nil }
        let record = Self.record(row)
        return record.isDeletedLocally && !includeDeleted ? nil : record
    }

    static func records(in table: String, db: Database) throws -> [OfflineRecord] {
        try Row.fetchAll(db, sql: "SELECT * FROM record WHERE table_name = ? AND deleted = 0", arguments: [table]).map(record)
            .sorted { ($0.values["sys_updated_on"] ?? "", $0.sysID) > ($1.values["sys_updated_on"] ?? "", $1.sysID) }
    }

    static func record(_ row: Row) -> OfflineRecord {
        OfflineRecord(
            table: row["table_name"], sysID: row["sys_id"], values: decode(row["local"]), serverValues: decode(row["server"]),
            version: row["version"], hasPendingChanges: (row["pending"] as Int) != 0, isDeletedLocally: (row["deleted"] as Int) != 0,
            fetchedAt: (row["fetched_at"] as Double?).map { Date(timeIntervalSince1970: $0) }
        )
    }

    static func operation(_ row: Row) -> PendingOperation {
        PendingOperation(
            id: row["id"], table: row["table_name"], sysID: row["sys_id"], kind: PendingOperation.Kind(rawValue: row["kind"]) ?? .update,
            values: decode(row["field_values"]), base: decode(row["base"]), baseVersion: row["base_version"],
            idempotencyKey: row["idempotency_key"], state: PendingOperation.State(rawValue: row["state"]) ?? .queued,
            lastError: row["last_error"], attempts: row["attempts"], createdAt: Date(timeIntervalSince1970: row["created_at"])
        )
    }

    static func encode(_ values: [String: String]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(values)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    static func decode(_ text: String?) -> [String: String] {
        guard let text, let data = text.data(using: .utf8) else { return [:] }
        return (try? JSONDecoder().decode([String: String].self, from: data)) ?? [:]
    }

    func withSyncGate<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await syncing.run(body)
    }

    /// A request to the server, given up after ``requestTimeout`` (the request is cancelled, and the failure is a
    /// transport error: the server could not be reached this time).
    func timed<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let limit = requestTimeout
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw DocketError.noAnswer(within: limit)
            }
            return value
        }
    }
}

/// What the store refuses.
public enum OfflineError: Error, Sendable, Equatable, CustomStringConvertible {
    case missing(table: String, sysID: String)
    case exists(table: String, sysID: String)
    case noSuchOperation(Int64)
    /// A value for a field with a choice list that is neither one of its values nor one of its labels.
    case notAChoice(table: String, field: String, value: String, choices: [WorkChoice])
    /// A field the record kept here does not have (a typo), with the closest one it has.
    case unknownField(table: String, field: String, meant: String?)

    public var description: String {
        switch self {
        case .unknownField(let table, let field, let meant):
            return "\(table) has no field '\(field)'" + (meant.map { " (did you mean \($0)?)" } ?? "")
        case .notAChoice(let table, let field, let value, let choices):
            let meant = Suggestions.closest(to: value, among: choices.map(\.label), limit: 1).first
            return "'\(value)' is not one of the \(field) values of \(table) kept here"
                + (meant.map { " (did you mean \($0)?)" } ?? "") + ": "
                + choices.map { $0.label == $0.value ? $0.value : "\($0.label) (\($0.value))" }.joined(separator: ", ")
        case .missing(let table, let sysID): return "the offline store has no \(table) record \(sysID)"
        case .exists(let table, let sysID): return "the offline store already has \(table) record \(sysID)"
        case .noSuchOperation(let id): return "no pending operation \(id)"
        }
    }
}

/// Runs one body at a time, in arrival order.
final class SyncGate: Sendable {
    private let state = Mutex<(busy: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

    func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let go = state.withLock { state -> Bool in
                if state.busy {
                    state.waiting.append(continuation)
                    return false
                }
                state.busy = true
                return true
            }
            if go { continuation.resume() }
        }
        defer {
            let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
                if state.waiting.isEmpty {
                    state.busy = false
                    return nil
                }
                return state.waiting.removeFirst()
            }
            next?.resume()
        }
        return try await body()
    }
}

extension OfflineStore {
    /// Remembers a named list of records (the user's work, for instance) to show it again offline.
    public func saveList(_ name: String, table: String, ids: [String]) async throws {
        let encoded = Self.encode(["table": table, "ids": ids.joined(separator: ",")])
        try await database.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", arguments: ["list:" + name, encoded])
        }
    }

    /// A list saved with ``saveList(_:table:ids:)``: its records as the user sees them now (those deleted here left
    /// out), and when the oldest of them was read from the server; nil when the list was never saved.
    public func list(_ name: String) async throws -> (records: [OfflineRecord], asOf: Date?)? {
        try await database.read { db in
            guard let text = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: ["list:" + name]) else {
                return nil
            }
            let saved = Self.decode(text)
            let table = saved["table"] ?? ""
            let ids = (saved["ids"] ?? "").split(separator: ",").map(String.init)
            let records = try ids.compactMap { try Self.record($0, in: table, db: db) }
            return (records, records.compactMap(\.fetchedAt).min())
        }
    }

    /// A record by its number (`INC0010001`) or sys_id, as the user sees it.
    public func find(_ reference: String) async throws -> OfflineRecord? {
        try await database.read { db in
            if let row = try Row.fetchOne(
                db, sql: "SELECT * FROM record WHERE deleted = 0 AND (sys_id = ? OR json_extract(local, '$.number') = ?) LIMIT 1",
                arguments: [reference, reference.uppercased()]
            ) {
                return Self.record(row)
            }
            return nil
        }
    }
}
