import DocketKit
import DocketModel
import Foundation
import GRDB

extension OfflineStore {
    /// Journal fields: each value is a new entry, so two people's comments never conflict.
    static let journalFields: Set<String> = ["comments", "work_notes"]

    /// Sends the outbox, then catches up with the server's changes. Never throws for the server's sake: what it
    /// could not do is in the report, and everything not sent waits for the next call.
    @discardableResult
    public func sync() async throws -> SyncReport {
        try await withSyncGate {
            var report = SyncReport()
            try await self.flush(into: &report)
            if report.unreachable == nil, !report.needsSignIn {
                try await self.pull(into: &report)
            }
            report.remaining = try await self.pendingCount()
            return report
        }
    }

    /// Reads records from the server into the store (as `sysparm_query` `query` selects them, up to `limit`), and
    /// keeps them up to date from then on (``sync()`` follows the changes to their table). With `displayValues`
    /// they are read with `sysparm_display_value=all`, and ``details(_:in:)`` shows a reference's name offline.
    @discardableResult
    ///
    /// The query is remembered and read again after a resync, unless `remember` is false (a list of sys_ids that
    /// changes every time: the records it read are read again after a resync all the same, as every record held is).
    public func refresh(
        _ table: String, query: EncodedQuery? = nil, limit: Int = 1000, displayValues: Bool = false, remember: Bool = true
    ) async throws -> Int {
        try await withSyncGate {
            // Where the log stands before reading: a change made while reading is applied on the next pull.
            try await self.startFollowingIfNeeded()
            let count = try await self.read(table, query: query, limit: limit, displayValues: displayValues).count
            try await self.database.write { db in
                try Self.track(table, db: db)
                // Read again after a resync, so that the store answers as the server does for the same query.
                guard remember else { return }
                try db.execute(
                    sql: "INSERT OR REPLACE INTO refresh_query (table_name, query, row_limit) VALUES (?, ?, ?)",
                    arguments: [table, query?.description ?? "", limit]
                )
            }
            return count
        }
    }

    // MARK: Sending

    /// How many operations go in one Batch API request.
    static let batchSize = 50

    private func flush(into report: inout SyncReport) async throws {
        var stalled: Set<String> = []
        while true {
            let ready = try await nextOperations(skipping: stalled, limit: Self.batchSize)
            if ready.isEmpty { return }
            // One operation goes on its own; several share one round trip through the Batch API.
            let outcomes = ready.count == 1 ? [(ready[0], await send(ready[0]))] : await send(batch: ready)
            var stop = false
            for (operation, outcome) in outcomes {
                switch outcome {
                case .done(let values):
                    try await settle(operation, server: values)
                    report.sent += 1
                case .gone:
                    try await settleGone(operation)
                    report.sent += 1
                case .merged(let current):
                    // The server's changes were to other fields: sent again on the version it has now.
                    try await rebase(operation, on: current)
                case .conflict(let conflicts, let current, let version):
                    try await markConflict(operation, conflicts, current: current, version: version)
                    report.conflicts += 1
                    stalled.insert(operation.table + "/" + operation.sysID)
                case .refused(let message):
                    try await mark(operation, state: .failed, error: message)
                    report.failed += 1
                    stalled.insert(operation.table + "/" + operation.sysID)
                case .later:
                    try await mark(operation, state: .queued, error: nil)
                case .signIn(let message):
                    try await mark(operation, state: .queued, error: message)
                    report.needsSignIn = true
                    stop = true
                case .unreachable(let message):
                    try await mark(operation, state: .queued, error: message)
                    report.unreachable = message
                    stop = true
                }
            }
            if stop { return }
        }
    }

    /// The first queued operation of each record whose earlier operations are all sent (one record's operations go
    /// in order; a record in conflict or refused holds back only its own), up to `limit`, marked as being sent.
    private func nextOperations(skipping stalled: Set<String>, limit: Int) async throws -> [PendingOperation] {
        try await database.write { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT * FROM operation o WHERE o.id = (SELECT MIN(id) FROM operation p WHERE p.table_name = o.table_name AND p.sys_id = o.sys_id)
                AND o.state = 'queued' ORDER BY o.id
                """)
            let ready = rows.map(Self.operation).filter { !stalled.contains($0.table + "/" + $0.sysID) }.prefix(limit)
            for operation in ready {
                try db.execute(sql: "UPDATE operation SET state = 'sending', attempts = attempts + 1 WHERE id = ?", arguments: [operation.id])
            }
            return Array(ready)
        }
    }

    /// Sends several operations (of different records) in one Batch API request.
    private func send(batch operations: [PendingOperation]) async -> [(PendingOperation, Outcome)] {
        let requests = operations.map { operation -> BatchService.Request in
            var path = "/api/now/table/" + Self.escape(operation.table)
            if operation.kind != .create { path += "/" + Self.escape(operation.sysID) }
            path += "?sysparm_display_value=false&sysparm_exclude_reference_link=true"
            var headers = ["Idempotency-Key": operation.idempotencyKey]
            if operation.kind != .create, let version = operation.baseVersion { headers["If-Match"] = "\"\(version)\"" }
            let method = operation.kind == .create ? "POST" : operation.kind == .update ? "PATCH" : "DELETE"
            return BatchService.Request(
                id: String(operation.id), method: method, url: path, headers: headers,
                body: operation.kind == .delete ? nil : Self.body(operation.values)
            )
        }
        let result: BatchService.Result
        do {
            result = try await timed { [client] in try await client.batch.send(requests) }
        } catch let error as DocketError {
            let outcome = outcome(status: nil, body: nil, error: error, for: operations[0])
            return operations.map { ($0, outcome) }
        } catch {
            return operations.map { ($0, .unreachable("\(error)")) }
        }
        let answers = Dictionary(result.answers.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        return operations.map { operation in
            guard let answer = answers[String(operation.id)] else { return (operation, .later) }
            if (200..<300).contains(answer.status) {
                if operation.kind == .delete { return (operation, .gone) }
                guard let json = try? JSONValue.parse(answer.body), let result = json["result"], case .object = result else {
                    return (operation, .refused("the instance's answer had no record"))
                }
                return (operation, .done(DocketKit.TableRecord(json: result).rawValues))
            }
            return (operation, outcome(status: answer.status, body: answer.body, error: nil, for: operation))
        }
    }

    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
    }

    /// A record body, its members in name order (the same operation is always the same bytes).
    static func body(_ values: [String: String]) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(values)) ?? Data("{}".utf8)
    }

    enum Outcome: Sendable {
        case done([String: String])
        /// Not handled this time (a batch ran out of time before it): sent again next round.
        case later
        case gone
        case merged([String: String])
        case conflict([OfflineConflict], current: [String: String], version: Int?)
        case refused(String)
        case signIn(String)
        case unreachable(String)
    }

    private func send(_ operation: PendingOperation) async -> Outcome {
        do {
            return try await timed { [self] in try await self.sendAlone(operation) }
        } catch let error as DocketError {
            return outcome(of: error, for: operation)
        } catch {
            return .unreachable("\(error)")
        }
    }

    private func sendAlone(_ operation: PendingOperation) async throws -> Outcome {
        do {
            switch operation.kind {
            case .create:
                let record = try await client.table.createRecord(
                    with: operation.values, in: operation.table, idempotencyKey: operation.idempotencyKey
                )
                return .done(record.rawValues)
            case .update:
                let record = try await client.table.updateRecord(
                    operation.sysID, in: operation.table, with: operation.values, ifVersion: operation.baseVersion,
                    idempotencyKey: operation.idempotencyKey
                )
                return .done(record.rawValues)
            case .delete:
                try await client.table.deleteRecord(
                    operation.sysID, in: operation.table, ifVersion: operation.baseVersion, idempotencyKey: operation.idempotencyKey
                )
                return .gone
            }
        } catch let error as DocketError {
            return outcome(of: error, for: operation)
        } catch {
            return .unreachable("\(error)")
        }
    }

    private func outcome(of error: DocketError, for operation: PendingOperation) -> Outcome {
        outcome(status: nil, body: nil, error: error, for: operation)
    }

    /// What an error answer means for an operation: from a request's error, or a batch answer's status and body.
    private func outcome(status: Int?, body: Data?, error: DocketError?, for operation: PendingOperation) -> Outcome {
        if let error, error.kind == .loginExpired { return .signIn(error.description) }
        if let error, error.kind != .http { return .unreachable(error.description) }
        guard let status = status ?? error?.status else { return .unreachable(error?.description ?? "no answer") }
        let body = body ?? error?.responseBody
        let message = error?.description ?? Self.message(status: status, body: body)
        switch status {
        case 401: return .signIn(message)
        case 404 where operation.kind == .delete: return .gone
        case 404 where operation.kind == .update:
            return .conflict([conflict(operation, kind: .deletedOnServer, field: "")], current: [:], version: nil)
        case 412:
            guard let body, let json = try? JSONValue.parse(body), let result = json["result"], case .object = result else {
                return .refused(message)
            }
            return merge(operation, with: DocketKit.TableRecord(json: result).rawValues)
        case 408, 429, 500...599: return .unreachable(message)
        default: return .refused(message)
        }
    }

    /// "Invalid field (HTTP 400)", from an error answer's ServiceNow envelope.
    static func message(status: Int, body: Data?) -> String {
        let json = body.flatMap { try? JSONValue.parse($0) }
        let text = [json?["error"]?["message"]?.stringValue, json?["error"]?["detail"]?.stringValue].compactMap { $0 }.joined(separator: ": ")
        return (text.isEmpty ? "the instance answered" : text) + " (HTTP \(status))"
    }

    /// Three-way merge of an operation with the record the server has now: fields only the user changed are sent
    /// again, fields only the server changed are kept, a field both changed differently is a conflict.
    func merge(_ operation: PendingOperation, with current: [String: String]) -> Outcome {
        let version = current["sys_mod_count"].flatMap { Int($0) }
        if operation.kind == .delete {
            return .conflict([conflict(operation, kind: .changedOnServer, field: "")], current: current, version: version)
        }
        var conflicts: [OfflineConflict] = []
        for (field, mine) in operation.values.sorted(by: { $0.key < $1.key }) where !Self.journalFields.contains(field) {
            let base = operation.base[field] ?? ""
            let theirs = current[field] ?? ""
            if theirs == base || theirs == mine { continue }
            conflicts.append(OfflineConflict(
                operationID: operation.id, table: operation.table, sysID: operation.sysID, number: current["number"],
                kind: .field, field: field, base: base, mine: mine, theirs: theirs
            ))
        }
        return conflicts.isEmpty ? .merged(current) : .conflict(conflicts, current: current, version: version)
    }

    private func conflict(_ operation: PendingOperation, kind: OfflineConflict.Kind, field: String) -> OfflineConflict {
        OfflineConflict(
            operationID: operation.id, table: operation.table, sysID: operation.sysID, number: nil, kind: kind, field: field,
            base: nil, mine: nil, theirs: nil
        )
    }

    /// The server accepted an operation: it leaves the outbox, and the record takes the server's answer.
    private func settle(_ operation: PendingOperation, server values: [String: String]) async throws {
        try await database.write { db in
            try db.execute(sql: "DELETE FROM operation WHERE id = ?", arguments: [operation.id])
            let version = values["sys_mod_count"].flatMap { Int($0) }
            try Self.storeServer(values, table: operation.table, sysID: operation.sysID, db: db)
            // Later operations made on the version this one started from go on from the new one.
            try db.execute(
                sql: "UPDATE operation SET base_version = ? WHERE table_name = ? AND sys_id = ? AND (base_version IS ? OR base_version IS NULL)",
                arguments: [version, operation.table, operation.sysID, operation.baseVersion]
            )
            try Self.rebuild(operation.table, operation.sysID, db: db)
        }
    }

    private func settleGone(_ operation: PendingOperation) async throws {
        try await database.write { db in
            try db.execute(sql: "DELETE FROM operation WHERE id = ?", arguments: [operation.id])
            try db.execute(sql: "DELETE FROM record WHERE table_name = ? AND sys_id = ?", arguments: [operation.table, operation.sysID])
        }
    }

    private func rebase(_ operation: PendingOperation, on current: [String: String]) async throws {
        try await database.write { db in
            var base = operation.base
            for field in operation.values.keys { base[field] = current[field] ?? "" }
            try db.execute(
                sql: "UPDATE operation SET base = ?, base_version = ?, state = 'queued', last_error = NULL WHERE id = ?",
                arguments: [Self.encode(base), current["sys_mod_count"].flatMap { Int($0) }, operation.id]
            )
            try Self.storeServer(current, table: operation.table, sysID: operation.sysID, db: db)
            try Self.rebuild(operation.table, operation.sysID, db: db)
        }
    }

    private func markConflict(
        _ operation: PendingOperation, _ conflicts: [OfflineConflict], current: [String: String], version: Int?
    ) async throws {
        try await database.write { db in
            try db.execute(sql: "DELETE FROM conflict WHERE operation_id = ?", arguments: [operation.id])
            for conflict in conflicts {
                try db.execute(
                    sql: "INSERT INTO conflict (operation_id, field, kind, base, mine, theirs, their_version) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    arguments: [operation.id, conflict.field, conflict.kind.rawValue, conflict.base, conflict.mine, conflict.theirs, version]
                )
            }
            try db.execute(
                sql: "UPDATE operation SET state = 'conflict', last_error = ? WHERE id = ?",
                arguments: [conflicts.first?.kind == .field ? "changed on the server too" : "the record changed on the server", operation.id]
            )
            if !current.isEmpty { try Self.storeServer(current, table: operation.table, sysID: operation.sysID, db: db) }
            try Self.rebuild(operation.table, operation.sysID, db: db)
        }
    }

    private func mark(_ operation: PendingOperation, state: PendingOperation.State, error: String?) async throws {
        try await database.write { db in
            try db.execute(sql: "UPDATE operation SET state = ?, last_error = ? WHERE id = ?", arguments: [state.rawValue, error, operation.id])
        }
    }

    // MARK: Catching up

    /// Takes where the event log stands as the cursor, when the store has none yet.
    func startFollowingIfNeeded() async throws {
        if try await cursor() == nil, case .changes(_, let through) = try await timed({ [client] in try await client.changes(since: nil) }) {
            try await setCursor(through)
        }
    }

    private func cursor() async throws -> Int? {
        try await database.read { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'cursor'").flatMap { Int($0) } }
    }

    private func setCursor(_ value: Int) async throws {
        try await database.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('cursor', ?)", arguments: [String(value)])
        }
    }

    private func pull(into report: inout SyncReport) async throws {
        let client = client
        do {
            guard let since = try await cursor() else {
                // Nothing was read from this server yet: follow from now.
                if case .changes(_, let through) = try await timed({ try await client.changes(since: nil) }) { try await setCursor(through) }
                return
            }
            switch try await timed({ try await client.changes(since: since) }) {
            case .changes(let changes, let through):
                let applied = try await apply(changes)
                report.applied += applied
                try await setCursor(through)
            case .resync:
                // The log no longer reaches back: read every record the store holds again.
                guard case .changes(_, let through) = try await timed({ try await client.changes(since: nil) }) else { return }
                try await refetchAll()
                try await setCursor(through)
                report.refetched = true
            }
        } catch let error as DocketError {
            // The server's failure is in the report (the store's own failures are thrown).
            if error.kind == .loginExpired || error.status == 401 { report.needsSignIn = true } else { report.unreachable = error.description }
        }
    }

    /// Applies the server's changes to the records the store holds (and new records of the tables it follows);
    /// the user's pending changes stay on top.
    private func apply(_ changes: [RecordChange]) async throws -> Int {
        guard !changes.isEmpty else { return 0 }
        return try await database.write { db in
            let tracked = Set(try String.fetchAll(db, sql: "SELECT table_name FROM tracked"))
            // Records with pending operations: the only ones whose view must be worked out again.
            var pending = Set(try Row.fetchAll(db, sql: "SELECT DISTINCT table_name, sys_id FROM operation").map {
                ($0["table_name"] as String) + "/" + ($0["sys_id"] as String)
            })
            // A change names the record's class (`incident`); the store may hold it under a table it extends
            // (`task`, as My Work reads it). sys_ids are unique across tables, so the record is found by its id.
            let select = try db.cachedStatement(sql: "SELECT table_name, server FROM record WHERE sys_id = ? ORDER BY table_name = ? DESC LIMIT 1")
            var applied = 0
            for change in changes {
                let held = try Row.fetchOne(select, arguments: [change.sysID, change.table])
                let table: String = held?["table_name"] ?? change.table
                let server: String? = held?["server"]
                let key = table + "/" + change.sysID
                switch change.kind {
                case .deleted, .left:
                    guard server != nil else { continue }
                    // With pending operations the record stays: sending them finds it gone, and says so.
                    if !pending.contains(key) {
                        try db.execute(sql: "DELETE FROM record WHERE table_name = ? AND sys_id = ?", arguments: [table, change.sysID])
                        try Self.forgetDetails(table, change.sysID, db: db)
                    }
                    applied += 1
                case .entered, .changed:
                    guard server != nil || tracked.contains(change.table) else { continue }
                    var values = server.map { Self.decode($0) } ?? [:]
                    values.merge(change.record) { _, new in new }
                    for field in Self.journalFields where change.fields.contains(field) {
                        // The entry joins the record's journal (when the store keeps it); the field itself stays empty.
                        try Self.addJournalEntry(
                            table, change.sysID, element: field, value: values[field] ?? "", createdOn: change.time, createdBy: change.user, db: db
                        )
                        values[field] = ""
                    }
                    try Self.storeServer(values, table: table, sysID: change.sysID, db: db, settled: !pending.contains(key))
                    if pending.contains(key) { try Self.rebuild(table, change.sysID, db: db) }
                    applied += 1
                }
            }
            pending.removeAll()
            return applied
        }
    }

    /// Reads the records a query selects into the store; returns their sys_ids.
    private func read(_ table: String, query: EncodedQuery?, limit: Int, displayValues: Bool = false) async throws -> Set<String> {
        var found: Set<String> = []
        for try await page in client.table.paginator(
            in: table, query: query, pageSize: min(limit, 1000), displayValue: displayValues ? .all : .false
        ) {
            try await store(page.records.map(\.rawValues), table: table, display: displayValues ? page.records.map(Self.displayPairs) : nil)
            found.formUnion(page.records.map(\.sysID))
            if found.count >= limit { break }
        }
        return found
    }

    /// After a resync: every query the store was filled with is read again (new records come in), then every other
    /// record it holds; records the server no longer has (or no longer shows) leave, unless operations concern them.
    private func refetchAll() async throws {
        let (held, queries) = try await database.read { db in
            (
                try Row.fetchAll(db, sql: "SELECT table_name, sys_id FROM record WHERE server != '{}'").map { ($0["table_name"] as String, $0["sys_id"] as String) },
                try Row.fetchAll(db, sql: "SELECT table_name, query, row_limit FROM refresh_query").map {
                    ($0["table_name"] as String, $0["query"] as String, $0["row_limit"] as Int)
                }
            )
        }
        var seen: [String: Set<String>] = [:]
        for (table, text, limit) in queries {
            seen[table, default: []].formUnion(try await read(table, query: text.isEmpty ? nil : try EncodedQuery(text), limit: limit))
        }
        for (table, all) in Dictionary(grouping: held, by: \.0).mapValues({ $0.map(\.1) }) {
            var found = seen[table] ?? []
            let ids = all.filter { !found.contains($0) }
            for start in stride(from: 0, to: ids.count, by: 200) {
                let chunk = Array(ids[start..<min(ids.count, start + 200)])
                let query = EncodedQuery.where("sys_id", .in, chunk.joined(separator: ","))
                for try await page in client.table.paginator(in: table, query: query, pageSize: 200) {
                    try await store(page.records.map(\.rawValues), table: table)
                    found.formUnion(page.records.map(\.sysID))
                }
            }
            let missing = ids.filter { !found.contains($0) }
            try await database.write { db in
                for sysID in missing {
                    let pending = try Int.fetchOne(
                        db, sql: "SELECT COUNT(*) FROM operation WHERE table_name = ? AND sys_id = ?", arguments: [table, sysID]
                    ) ?? 0
                    if pending == 0 {
                        try db.execute(sql: "DELETE FROM record WHERE table_name = ? AND sys_id = ?", arguments: [table, sysID])
                        try Self.forgetDetails(table, sysID, db: db)
                    }
                }
            }
        }
    }

    /// Stores records read from the server (with each one's display values, when read with them).
    func store(_ records: [[String: String]], table: String, display: [[String: [String]]]? = nil) async throws {
        try await database.write { db in
            for (index, values) in records.enumerated() {
                guard let sysID = values["sys_id"], !sysID.isEmpty else { continue }
                try Self.storeServer(values, table: table, sysID: sysID, db: db)
                try Self.rebuild(table, sysID, db: db)
                if let display, index < display.count {
                    try db.execute(
                        sql: "UPDATE record SET display = ? WHERE table_name = ? AND sys_id = ?",
                        arguments: [Self.encodeDisplay(display[index]), table, sysID]
                    )
                }
            }
        }
    }

    /// Stores the server's values of a record. `settled`: no operation of this process or another concerns it, so what
    /// the user sees is the server's values too (otherwise ``rebuild(_:_:db:)`` works that out).
    static func storeServer(_ values: [String: String], table: String, sysID: String, db: Database, settled: Bool = false) throws {
        let version = values["sys_mod_count"].flatMap { Int($0) }
        let encoded = encode(values)
        try db.cachedStatement(sql: """
            INSERT INTO record (table_name, sys_id, server, local, version, fetched_at) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (table_name, sys_id) DO UPDATE SET server = excluded.server, version = excluded.version,
            fetched_at = excluded.fetched_at\(settled ? ", local = excluded.local" : "")
            """).execute(arguments: [table, sysID, encoded, encoded, version, Date().timeIntervalSince1970])
    }
}

extension DocketKit.TableRecord {
    /// Every field as its stored value (a reference as its sys_id).
    var rawValues: [String: String] {
        fieldNames.reduce(into: [:]) { values, name in values[name] = self[name] ?? "" }
    }
}
