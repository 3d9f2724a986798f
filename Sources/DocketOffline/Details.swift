import DocketKit
import DocketModel
import Foundation
import GRDB

/// A journal entry (comment or work note) as the offline store holds it.
public struct OfflineJournalEntry: Sendable, Equatable {
    /// `comments` or `work_notes`.
    public var element: String
    public var value: String
    /// When it was written (UTC `yyyy-MM-dd HH:mm:ss`); for one written here, when it was queued.
    public var createdOn: String
    /// Who wrote it (user name); empty for one written here.
    public var createdBy: String
    /// Written here and not sent yet.
    public var isPending: Bool

    public init(element: String, value: String, createdOn: String, createdBy: String, isPending: Bool = false) {
        self.element = element
        self.value = value
        self.createdOn = createdOn
        self.createdBy = createdBy
        self.isPending = isPending
    }
}

/// What an item's page shows: the record, each field as a person reads it, and its journal.
public struct OfflineDetails: Sendable, Equatable {
    public var record: OfflineRecord
    /// Each field as a person reads it: the server's display value while the field still holds the value it was
    /// read with, else the label of the value in the field's choice list, else the value itself.
    public var displayValues: [String: String]
    /// Newest first: entries written here and not sent yet, then the server's.
    public var journal: [OfflineJournalEntry]
    /// When the journal was last read from the server; nil when it never was (entries that arrived through
    /// ``OfflineStore/sync()`` since are in ``journal`` all the same).
    public var journalFetchedAt: Date?

    /// A field as a person reads it ("" when the record has no such field).
    public func display(_ field: String) -> String { displayValues[field] ?? record.values[field] ?? "" }
}

extension OfflineStore {
    static func registerDetailMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v3-details") { db in
            try db.execute(sql: """
                ALTER TABLE record ADD COLUMN display TEXT NOT NULL DEFAULT '{}';
                CREATE INDEX record_sys_id ON record (sys_id);
                CREATE TABLE journal (
                    table_name TEXT NOT NULL, sys_id TEXT NOT NULL, position INTEGER NOT NULL, element TEXT NOT NULL,
                    value TEXT NOT NULL, created_on TEXT NOT NULL, created_by TEXT NOT NULL,
                    PRIMARY KEY (table_name, sys_id, position));
                CREATE TABLE journal_read (
                    table_name TEXT NOT NULL, sys_id TEXT NOT NULL, fetched_at REAL NOT NULL, PRIMARY KEY (table_name, sys_id));
                CREATE TABLE choice (
                    table_name TEXT NOT NULL, element TEXT NOT NULL, position INTEGER NOT NULL, value TEXT NOT NULL,
                    label TEXT NOT NULL, PRIMARY KEY (table_name, element, position));
                CREATE TABLE choice_read (table_name TEXT PRIMARY KEY NOT NULL, fetched_at REAL NOT NULL);
                """)
        }
    }

    /// How many journal entries the store keeps of a record.
    public static let journalLimit = 50

    /// How long a table's choice lists are used before ``keepChoices(of:force:)`` reads them again.
    static let choicesLifetime: TimeInterval = 24 * 3600

    // MARK: Keeping what a page shows

    /// Keeps a record the user opened, as read with `sysparm_display_value=all` (its values and display values),
    /// with its journal (newest first, as ``MyWorkService/comments(for:limit:)`` answers) when given, and reads the
    /// choice lists of its class once a day; from then on ``details(_:in:)`` shows it offline, and ``sync()`` keeps
    /// it current. Returns the record's table in the store (a task is kept under the table it was first kept under).
    @discardableResult
    public func keep(_ record: DocketKit.TableRecord, in table: String, journal: [JournalEntry]? = nil) async throws -> String {
        let sysID = record.sysID
        guard !sysID.isEmpty else { throw OfflineError.missing(table: table, sysID: "") }
        // The first record kept: the event log is followed from here on (a change made since the caller read the
        // record arrives with the next sync only if the log is followed from before it; it was read a moment ago).
        try await startFollowingIfNeeded()
        let values = record.rawValues
        let encodedDisplay = Self.encodeDisplay(Self.displayPairs(record))
        let keptIn = try await database.write { db -> String in
            // Already held under another table (an incident kept as a task): kept there.
            let heldIn = try String.fetchOne(
                db, sql: "SELECT table_name FROM record WHERE sys_id = ? ORDER BY table_name = ? DESC LIMIT 1", arguments: [sysID, table]
            ) ?? table
            let pending = try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM operation WHERE table_name = ? AND sys_id = ?", arguments: [heldIn, sysID]
            ) ?? 0
            try Self.storeServer(values, table: heldIn, sysID: sysID, db: db, settled: pending == 0)
            if pending > 0 { try Self.rebuild(heldIn, sysID, db: db) }
            try db.execute(
                sql: "UPDATE record SET display = ? WHERE table_name = ? AND sys_id = ?", arguments: [encodedDisplay, heldIn, sysID]
            )
            if let journal {
                try db.execute(sql: "DELETE FROM journal WHERE table_name = ? AND sys_id = ?", arguments: [heldIn, sysID])
                // Stored oldest first, so that an entry arriving later through the event log goes on top.
                for (position, entry) in journal.prefix(Self.journalLimit).reversed().enumerated() {
                    try db.execute(
                        sql: """
                            INSERT INTO journal (table_name, sys_id, position, element, value, created_on, created_by)
                            VALUES (?, ?, ?, ?, ?, ?, ?)
                            """,
                        arguments: [heldIn, sysID, position, entry.element, entry.value, entry.createdOn, entry.createdBy]
                    )
                }
                try db.execute(
                    sql: "INSERT OR REPLACE INTO journal_read (table_name, sys_id, fetched_at) VALUES (?, ?, ?)",
                    arguments: [heldIn, sysID, Date().timeIntervalSince1970]
                )
            }
            return heldIn
        }
        try await keepChoices(of: values["sys_class_name"].flatMap { $0.isEmpty ? nil : $0 } ?? table)
        return keptIn
    }

    /// Reads the choice lists of a table (and those it inherits) from the server and keeps them, unless they were
    /// read in the last day (`force` reads them anyway).
    public func keepChoices(of table: String, force: Bool = false) async throws {
        if !force {
            let readAt = try await database.read { db in
                try Double.fetchOne(db, sql: "SELECT fetched_at FROM choice_read WHERE table_name = ?", arguments: [table])
            }
            if let readAt, Date().timeIntervalSince1970 - readAt < Self.choicesLifetime { return }
        }
        let lists = try await ServiceNowBackend(client: client).choiceLists(table: table)
        try await database.write { db in
            try db.execute(sql: "DELETE FROM choice WHERE table_name = ?", arguments: [table])
            for (element, choices) in lists {
                for (position, choice) in choices.enumerated() {
                    try db.execute(
                        sql: "INSERT INTO choice (table_name, element, position, value, label) VALUES (?, ?, ?, ?, ?)",
                        arguments: [table, element, position, choice.value, choice.label]
                    )
                }
            }
            try db.execute(
                sql: "INSERT OR REPLACE INTO choice_read (table_name, fetched_at) VALUES (?, ?)", arguments: [table, Date().timeIntervalSince1970]
            )
        }
    }

    // MARK: Reading a page offline

    /// A field's choice list as the store keeps it (for the record's class: `incident`, not `task`); empty when the
    /// store has none.
    public func choices(in table: String, field: String) async throws -> [WorkChoice] {
        try await database.read { db in try Self.choices(in: table, field: field, db: db) }
    }

    /// A record with its fields as a person reads them and its journal; nil when the store does not have it.
    public func details(_ sysID: String, in table: String) async throws -> OfflineDetails? {
        try await database.read { db in
            guard let row = try Row.fetchOne(
                db, sql: "SELECT * FROM record WHERE table_name = ? AND sys_id = ? AND deleted = 0", arguments: [table, sysID]
            ) else { return nil }
            let record = Self.record(row)
            let display = Self.decodeDisplay(row["display"])
            let recordClass = record.values["sys_class_name"].flatMap { $0.isEmpty ? nil : $0 } ?? table
            var labels: [String: [String: String]] = [:]
            for choice in try Row.fetchAll(db, sql: "SELECT element, value, label FROM choice WHERE table_name = ?", arguments: [recordClass]) {
                labels[choice["element"], default: [:]][choice["value"]] = choice["label"]
            }
            var shown: [String: String] = [:]
            for (field, value) in record.values {
                if let pair = display[field], pair.count == 2, pair[0] == value {
                    shown[field] = pair[1]
                } else if let label = labels[field]?[value] {
                    shown[field] = label
                } else {
                    shown[field] = value
                }
            }
            for field in Self.journalFields { shown[field] = "" }
            // Entries written here: the comment operations still waiting, newest first.
            var journal: [OfflineJournalEntry] = []
            let operations = try Row.fetchAll(
                db, sql: "SELECT * FROM operation WHERE table_name = ? AND sys_id = ? ORDER BY id DESC", arguments: [table, sysID]
            ).map(Self.operation)
            for operation in operations {
                for field in Self.journalFields.sorted() {
                    guard let text = operation.values[field], !text.isEmpty else { continue }
                    journal.append(OfflineJournalEntry(
                        element: field, value: text, createdOn: GlideDateTime.format(operation.createdAt), createdBy: "", isPending: true
                    ))
                }
            }
            for entry in try Row.fetchAll(
                db, sql: "SELECT * FROM journal WHERE table_name = ? AND sys_id = ? ORDER BY position DESC", arguments: [table, sysID]
            ) {
                journal.append(OfflineJournalEntry(
                    element: entry["element"], value: entry["value"], createdOn: entry["created_on"], createdBy: entry["created_by"]
                ))
            }
            let fetched = try Double.fetchOne(
                db, sql: "SELECT fetched_at FROM journal_read WHERE table_name = ? AND sys_id = ?", arguments: [table, sysID]
            )
            return OfflineDetails(
                record: record, displayValues: shown, journal: journal, journalFetchedAt: fetched.map { Date(timeIntervalSince1970: $0) }
            )
        }
    }

    // MARK: Internals

    static func choices(in table: String, field: String, db: Database) throws -> [WorkChoice] {
        try Row.fetchAll(
            db, sql: "SELECT value, label FROM choice WHERE table_name = ? AND element = ? ORDER BY position", arguments: [table, field]
        ).map { WorkChoice(value: $0["value"], label: $0["label"]) }
    }

    /// An entry that arrived through the event log joins the journal of a record whose journal the store keeps.
    static func addJournalEntry(
        _ table: String, _ sysID: String, element: String, value: String, createdOn: String, createdBy: String, db: Database
    ) throws {
        guard !value.isEmpty, try Row.fetchOne(
            db, sql: "SELECT 1 FROM journal_read WHERE table_name = ? AND sys_id = ?", arguments: [table, sysID]
        ) != nil else { return }
        let next = (try Int.fetchOne(
            db, sql: "SELECT MAX(position) FROM journal WHERE table_name = ? AND sys_id = ?", arguments: [table, sysID]
        ) ?? -1) + 1
        try db.execute(
            sql: "INSERT INTO journal (table_name, sys_id, position, element, value, created_on, created_by) VALUES (?, ?, ?, ?, ?, ?, ?)",
            arguments: [table, sysID, next, element, value, createdOn, createdBy]
        )
        try db.execute(
            sql: "DELETE FROM journal WHERE table_name = ? AND sys_id = ? AND position <= ?",
            arguments: [table, sysID, next - journalLimit]
        )
    }

    /// A record that left the store takes its journal with it.
    static func forgetDetails(_ table: String, _ sysID: String, db: Database) throws {
        try db.execute(sql: "DELETE FROM journal WHERE table_name = ? AND sys_id = ?", arguments: [table, sysID])
        try db.execute(sql: "DELETE FROM journal_read WHERE table_name = ? AND sys_id = ?", arguments: [table, sysID])
    }

    /// A record's display values that differ from its values, each with the value it was read with.
    static func displayPairs(_ record: DocketKit.TableRecord) -> [String: [String]] {
        var display: [String: [String]] = [:]
        for name in record.fieldNames {
            if let shown = record.displayValue(name), let value = record[name], shown != value { display[name] = [value, shown] }
        }
        return display
    }

    /// `{"state": ["6", "Resolved"]}`: each display value with the value it was read with.
    static func encodeDisplay(_ display: [String: [String]]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(display)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    static func decodeDisplay(_ text: String?) -> [String: [String]] {
        guard let text, let data = text.data(using: .utf8) else { return [:] }
        return (try? JSONDecoder().decode([String: [String]].self, from: data)) ?? [:]
    }
}
