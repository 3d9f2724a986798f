import DocketModel
import Foundation
import Logging
import SQLKit

/// Creates and migrates the physical tables, and loads the catalog from `sys_db_object`, `sys_dictionary`,
/// `sys_choice` and `sys_number`.
enum SchemaStore {
    /// The layout this docketd writes: 1 before migrations were recorded, 2 since (see ``Migrations``).
    static let schemaVersion = 2

    /// Every step that brings an existing database up to date, in order: named migrations, each run once and
    /// recorded; and reconciliations with this binary's base schema, run on every start. Append only: a step is
    /// never renamed, reordered or removed once released.
    static let steps: [Migrations.Step] = [
        .once("2026-11-21-order-indexes") { db, _ in try await ensureOrderIndexes(db) },
        .once("2026-11-22-event-log-values") { db, _ in try await upgradeEventLog(db) },
        .once("2026-11-22-attachment-data") { db, _ in try await createSideTables(db) },
        .everyStart("base-tables") { db, now in try await addMissingBaseTables(db, now: now) },
        .once("2026-11-22-user-password-and-references") { db, now in try await upgradeUserFields(db, now: now) },
        .once("2026-11-22-attachment-creator-index") { db, _ in try await ensureAttachmentCreatorIndex(db) },
        .everyStart("metadata-files") { db, _ in try await syncMetadataFiles(db) },
        .once("2026-11-22-sessions") { db, _ in try await createSessionTable(db) },
        .once("2026-11-22-rate-counts") { db, _ in try await createRateCountTable(db) },
        .once("2026-11-22-task-assignee-index") { db, _ in try await ensureAssigneeIndex(db) },
        .once("2026-11-22-edit-sessions") { db, _ in try await createEditTable(db) },
        .once("2026-11-23-login-failures") { db, _ in try await createLoginFailureTable(db) },
        .once("2026-11-23-context-sessions") { db, _ in try await createContextTable(db) },
        .once("2026-11-25-department-head") { db, _ in try await renameDepartmentHead(db) },
        .once("2026-11-25-system-properties") { db, now in try await addSystemProperties(db, now: now) },
        .once("2026-11-25-response-date-time") { db, _ in try await keepResponseTimes(db) },
        .once("2026-11-26-attachment-chunks") { db, _ in try await moveAttachmentContentToChunks(db) },
        .once("2026-11-26-signing-keys") { db, _ in try await SigningKeyStore.createTable(db) },
        .once("2026-11-26-openid-grants") { db, _ in try await OpenIDGrants.createTables(db) },
        .once("2026-11-26-device-codes") { db, _ in try await OpenIDGrants.createDeviceTable(db) },
        .once("2026-11-26-command-line-device-grant") { db, _ in try await OAuthDirectory.allowDeviceGrant(db) },
        .once("2026-11-26-notifier") { db, _ in try await NotificationSchema.createSideTables(db) },
        .once("2026-11-27-idempotency-keys") { db, _ in try await IdempotencyRecords.createTable(db) },
        .once("2026-11-28-identity-links") { db, _ in try await IdentityLinks.createTable(db) },
        .once("2026-11-28-openid-session-issuer") { db, _ in try await OpenIDGrants.addSessionIssuer(db) },
        .once("2026-11-29-itsm-data") { db, now in try await ITSMSchema.seed(db, now: now) },
        .once("2026-11-29-case-insensitive-indexes") { db, _ in try await ensureCaseInsensitiveIndexes(db) },
        .once("2026-11-29-problem-transitions") { db, now in try await WorkflowSchema.addMissingActions(db: db, now: now) },
        .once("2026-11-30-concurrent-writes") { db, _ in try await allowConcurrentWrites(db) },
        .once("2026-12-02-notify-event-number") { db, _ in try await notifyEventNumbers(db) },
        .once("2026-12-03-announce-after-commit") { db, _ in try await announceAfterCommit(db) },
    ]

    /// How the database's schema stands against this docketd's (``Migrations/standing(_:steps:version:)``).
    static func standing(_ db: SQLExecutor) async throws -> Migrations.Standing {
        try await Migrations.standing(db, steps: steps, version: schemaVersion)
    }

    /// Prepares a database: on a new one, creates the system tables and writes the base schema, then applies
    /// ``steps`` as an upgrade would (so that a step is never only recorded: a new database and an upgraded one are
    /// built by the same steps); on an existing one, refuses a database a newer docketd wrote and applies ``steps``.
    /// Returns whether it was new.
    ///
    /// Instances started at once on one database prepare it one after the other: the first holds the write lock
    /// while it creates everything, which on a slow machine outlasts a request's lock wait. So a server's start that
    /// meets a lock held past that wait tries again, a second apart and saying so, for up to `lockWait` in all (the
    /// server passes minutes; commands, none: they fail at once, as before). Any other failure ends it at once.
    static func prepare(
        _ storage: any Storage, now: Date = Date(), lockWait: Duration = .zero, logger: Logger? = nil
    ) async throws -> Bool {
        let started = ContinuousClock.now
        var lastSaid: ContinuousClock.Instant? = nil
        while true {
            try Task.checkCancellation()
            do {
                return try await prepareOnce(storage, now: now)
            } catch let error as StorageUnavailable where error.lockWait && ContinuousClock.now - started < lockWait {
                if lastSaid.map({ ContinuousClock.now - $0 >= .seconds(30) }) ?? true {
                    lastSaid = .now
                    logger?.notice("The database's write lock is held by another process (another docketd preparing it?); waiting", metadata: [
                        "waited": "\(ContinuousClock.now - started)", "at most": "\(lockWait)", "error": "\(error)",
                    ])
                }
                try await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// How long a server's start waits for another process that holds the write lock (``prepare(_:now:lockWait:logger:)``).
    static let startLockWait = Duration.seconds(300)

    private static func prepareOnce(_ storage: any Storage, now: Date) async throws -> Bool {
        try await storage.write { db in
            let exists = try await db.rows(db.dialect.tableExists("docket_meta")).isEmpty == false
            if exists {
                try await Migrations.upgrade(db, steps: steps, version: schemaVersion, now: GlideDateTime.format(now))
                return false
            }
            try await createSystemTables(db)
            let catalog = SchemaCatalog(tables: BaseSchema.tables, choices: [:])
            for root in catalog.roots { try await createPhysicalTable(root, catalog: catalog, db: db) }
            try await writeMetadata(BaseSchema.tables, choices: BaseSchema.choices, db: db, now: GlideDateTime.format(now))
            try await WorkflowSchema.writeModels(
                for: Set(WorkflowSchema.models.map(\.table)), db: db, now: GlideDateTime.format(now)
            )
            // Everything else (side tables, indexes, sessions, keys, notifications, …) comes from the steps.
            try await Migrations.upgrade(db, steps: steps, version: schemaVersion, now: GlideDateTime.format(now))
            // What a fresh install starts with (an upgraded database keeps the rules it has, none included).
            try await NotificationSchema.addDefaultRules(db, now: GlideDateTime.format(now))
            return true
        }
    }

    // MARK: Creation

    private static func createSystemTables(_ db: SQLExecutor) async throws {
        try await db.run("CREATE TABLE docket_meta (key TEXT PRIMARY KEY, value TEXT)")
        try await db.run(
            "CREATE TABLE docket_number_counter (table_name TEXT PRIMARY KEY, next_value "
                + SQLFragment(db.dialect.integerType) + " NOT NULL)"
        )
        // The event log: one row per committed change, in commit order (the sequence never goes back).
        try await db.run(
            "CREATE TABLE docket_event_log (seq " + SQLFragment(db.dialect.sequencePrimaryKey)
                + ", table_name TEXT NOT NULL, record_id TEXT NOT NULL, operation TEXT NOT NULL,"
                + " fields TEXT NOT NULL, user_name TEXT NOT NULL, created_on TEXT NOT NULL, root_table TEXT,"
                + " values_after TEXT, values_before TEXT)"
        )
    }

    /// The event log's row values (what a change wrote and what it replaced) and the class's root table came
    /// later: older logs get the columns, and their events have no values.
    private static func upgradeEventLog(_ db: SQLExecutor) async throws {
        var present = Set<String>()
        for row in try await db.rows(db.dialect.columnNames(of: "docket_event_log")) {
            if let name = try row.value(at: "name", kind: .text).text { present.insert(name) }
        }
        for column in ["root_table", "values_after", "values_before"] where !present.contains(column) {
            try await db.run("ALTER TABLE docket_event_log ADD COLUMN " + .identifier(column) + " TEXT")
        }
    }

    /// Tables outside the catalog that newer versions added (created when missing, on every start).
    /// The per-user attachment quota sums a user's attachments on every upload: index them by author.
    private static func ensureAttachmentCreatorIndex(_ db: SQLExecutor) async throws {
        try await db.run("CREATE INDEX IF NOT EXISTS ix_sys_attachment_creator ON sys_attachment (sys_created_by)")
    }

    /// "My active work, most recently updated first", the list every client starts with
    /// (`assigned_to=<me>^active=true^ORDERBYDESCsys_updated_on`), is read from this index a page at a time,
    /// whatever the size of `task`. Its directions are those the compiler sorts by, NULL placement included.
    private static func ensureAssigneeIndex(_ db: SQLExecutor) async throws {
        try await db.run(
            "CREATE INDEX IF NOT EXISTS ix_task_assigned_active_updated ON task (assigned_to, active, sys_updated_on"
                + SQLFragment(db.dialect.direction(descending: true)) + ", sys_id"
                + SQLFragment(db.dialect.direction(descending: false)) + ")"
        )
    }

    /// Session cookies, shared by every docketd on the database (see ``SessionStore``).
    private static func createSessionTable(_ db: SQLExecutor) async throws {
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_session (token_hash TEXT PRIMARY KEY NOT NULL, user_id TEXT NOT NULL,"
                + " expires_at " + SQLFragment(db.dialect.integerType) + " NOT NULL)"
        )
        try await db.run("CREATE INDEX IF NOT EXISTS ix_docket_session_user ON docket_session (user_id)")
    }

    /// Rate-limit counters per window, shared by every docketd on the database (see ``RateLimiter``).
    private static func createRateCountTable(_ db: SQLExecutor) async throws {
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_rate_count (counter TEXT NOT NULL, window_start "
                + SQLFragment(db.dialect.integerType) + " NOT NULL, count " + SQLFragment(db.dialect.integerType)
                + " NOT NULL, PRIMARY KEY (counter, window_start))"
        )
    }

    /// Records being edited (Compass's Edit → Commit / Revert), shared by every docketd on the database; one row per
    /// record, so that an edit locks it (see ``EditSessions``).
    private static func createEditTable(_ db: SQLExecutor) async throws {
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_edit (record_id TEXT PRIMARY KEY NOT NULL, table_name TEXT NOT NULL,"
                + " is_new " + SQLFragment(db.dialect.integerType) + " NOT NULL, display_id TEXT NOT NULL,"
                + " session TEXT NOT NULL, user_id TEXT NOT NULL, action TEXT NOT NULL, field_values TEXT NOT NULL,"
                + " expires_at " + SQLFragment(db.dialect.integerType) + " NOT NULL)"
        )
        try await db.run("CREATE INDEX IF NOT EXISTS ix_docket_edit_display ON docket_edit (display_id)")
    }

    /// Failed-login counts shared by every docketd on the database (see ``SharedLoginFailures``).
    private static func createLoginFailureTable(_ db: SQLExecutor) async throws {
        let integer = SQLFragment(db.dialect.integerType)
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_login_failure (key_hash TEXT PRIMARY KEY NOT NULL, failures " + integer
                + " NOT NULL, last_failure " + integer + " NOT NULL, blocked_until " + integer + " NOT NULL)"
        )
    }

    /// The context of ETO logins (see ``ContextSessions``).
    private static func createContextTable(_ db: SQLExecutor) async throws {
        let integer = SQLFragment(db.dialect.integerType)
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_context (token_hash TEXT PRIMARY KEY NOT NULL, kind TEXT NOT NULL,"
                + " enterprise TEXT NOT NULL, site " + integer + " NOT NULL, program " + integer + " NOT NULL, utc_offset "
                + integer + " NOT NULL)"
        )
    }

    private static func createSideTables(_ db: SQLExecutor) async throws {
        // Attachment content in pieces of at most ``RecordStore/attachmentChunkSize`` bytes, in order, so that no
        // statement carries (and no driver copies) a whole file.
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_attachment_chunk (sys_id TEXT NOT NULL, position "
                + SQLFragment(db.dialect.integerType) + " NOT NULL, data " + SQLFragment(db.dialect.blobType)
                + " NOT NULL, PRIMARY KEY (sys_id, position))"
        )
    }

    /// Content stored whole, one row per attachment, by docketd before 2026-11-26: each row becomes the first
    /// (and only) chunk of its attachment.
    private static func moveAttachmentContentToChunks(_ db: SQLExecutor) async throws {
        try await createSideTables(db)
        guard try await !db.rows(db.dialect.tableExists("docket_attachment_data")).isEmpty else { return }
        try await db.run(
            "INSERT INTO docket_attachment_chunk (sys_id, position, data) SELECT sys_id, 0, data FROM docket_attachment_data"
        )
        try await db.run("DROP TABLE docket_attachment_data")
    }

    /// Base tables added by a newer version of docketd: written into the metadata of an existing database,
    /// with their physical tables (or columns, for tables that extend an existing one).
    private static func addMissingBaseTables(_ db: SQLExecutor, now: String) async throws {
        var existing = Set<String>()
        for row in try await db.rows("SELECT name FROM sys_db_object") {
            if let name = try row.value(at: "name", kind: .text).text { existing.insert(name) }
        }
        try await addMissingBaseFields(db, now: now, skipping: Set(BaseSchema.tables.map(\.name)).subtracting(existing))
        let missing = BaseSchema.tables.filter { !existing.contains($0.name) }
        guard !missing.isEmpty else { return }
        let names = Set(missing.map(\.name))
        let catalog = SchemaCatalog(tables: BaseSchema.tables, choices: [:])
        for definition in missing {
            guard let table = catalog.table(definition.name) else { continue }
            if table.root == table.name {
                try await createPhysicalTable(table, catalog: catalog, db: db)
            } else if let root = catalog.table(table.root) {
                try await addMissingColumns(root, catalog: catalog, db: db)
            }
        }
        try await writeMetadata(missing, choices: BaseSchema.choices.filter { names.contains($0.0) }, db: db, now: now)
        // The first start with workflow tables seeds every table's model; later ones those of new tables.
        let modelled = names.contains("sys_wf_state") ? Set(WorkflowSchema.models.map(\.table)) : names
        try await WorkflowSchema.writeModels(for: modelled, db: db, now: now)
    }

    /// `sys_user` fields an older docketd defined differently: the password hash moves from `password` to
    /// `user_password` (the old name stays accepted in writes), and `department` and `location`, once free text,
    /// become references to `cmn_department` and `cmn_location`, each distinct text becoming a record of its own.
    private static func upgradeUserFields(_ db: SQLExecutor, now: String) async throws {
        let legacyPassword = try await db.rows(
            "SELECT sys_id FROM sys_dictionary WHERE name = 'sys_user' AND element = 'password'"
        )
        if !legacyPassword.isEmpty {
            try await db.run(
                "UPDATE sys_user SET user_password = password WHERE (user_password IS NULL OR user_password = '')"
                    + " AND password IS NOT NULL"
            )
            try await db.run("UPDATE sys_user SET password = NULL")
            try await db.run("DELETE FROM sys_dictionary WHERE name = 'sys_user' AND element = 'password'")
        }
        for (field, target) in [("department", "cmn_department"), ("location", "cmn_location")] {
            let text = try await db.rows(
                "SELECT sys_id FROM sys_dictionary WHERE name = 'sys_user' AND element = " + .bind(field)
                    + " AND internal_type = 'string'"
            )
            guard !text.isEmpty else { continue }
            let names = try await db.rows(
                "SELECT DISTINCT " + .identifier(field) + " AS v FROM sys_user WHERE " + .identifier(field)
                    + " IS NOT NULL AND " + .identifier(field) + " <> ''"
            ).compactMap { try $0.value(at: "v", kind: .text).text }
            for name in names {
                let existing = try await db.rows(
                    "SELECT sys_id FROM " + .identifier(target) + " WHERE name = " + .bind(name)
                ).first.flatMap { try? $0.value(at: "sys_id", kind: .text).text }
                let id = existing ?? SysID.stable("\(target):\(name)")
                if existing == nil {
                    try await insertMetadataRow(target, [("name", .text(name))], id: id, db: db, now: now)
                }
                try await db.run(
                    "UPDATE sys_user SET " + .identifier(field) + " = " + .bind(id) + " WHERE " + .identifier(field)
                        + " = " + .bind(name)
                )
            }
            try await db.run(
                "UPDATE sys_dictionary SET internal_type = 'reference', reference = " + .bind(target)
                    + ", max_length = 32 WHERE name = 'sys_user' AND element = " + .bind(field)
            )
        }
    }

    /// The system properties every instance has, with their defaults (those already set are kept).
    static let systemProperties: [(name: String, value: String, description: String)] = [
        (
            "glide.sys.default.tz", "UTC",
            "Time zone of users whose own (sys_user.time_zone) is empty: dates are shown to them in it (an IANA name)"
        ),
    ]

    private static func addSystemProperties(_ db: SQLExecutor, now: String) async throws {
        for property in systemProperties {
            let existing = try await db.rows("SELECT sys_id FROM sys_properties WHERE name = " + .bind(property.name))
            guard existing.isEmpty else { continue }
            try await insertMetadataRow(
                "sys_properties",
                [("name", .text(property.name)), ("value", .text(property.value)), ("type", .text("string")),
                 ("description", .text(property.description))],
                id: SysID.stable("sys_properties:\(property.name)"), db: db, now: now
            )
        }
    }

    /// A TouchPoint response's date (`eto_response.response_date`) keeps its time of day: once a `YYYY-MM-DD` text,
    /// now a date-time; the days stored so far become midnight UTC.
    private static func keepResponseTimes(_ db: SQLExecutor) async throws {
        let text = try await db.rows(
            "SELECT sys_id FROM sys_dictionary WHERE name = 'eto_response' AND element = 'response_date'"
                + " AND internal_type = 'string'"
        )
        guard !text.isEmpty else { return }
        try await db.run(
            "UPDATE sys_dictionary SET internal_type = 'glide_date_time', max_length = 40 WHERE name = 'eto_response'"
                + " AND element = 'response_date'"
        )
        try await db.run(
            "UPDATE eto_response SET response_date = response_date || ' 00:00:00' WHERE LENGTH(response_date) = 10"
        )
    }

    /// `cmn_department`'s head is `dept_head`, as on an instance (it was `head`): its values move to the field the
    /// base-tables step has just added, and the old field goes.
    private static func renameDepartmentHead(_ db: SQLExecutor) async throws {
        let old = try await db.rows(
            "SELECT sys_id FROM sys_dictionary WHERE name = 'cmn_department' AND element = 'head'"
        ).compactMap { try $0.value(at: "sys_id", kind: .text).text }
        guard !old.isEmpty else { return }
        try await db.run(
            "UPDATE cmn_department SET dept_head = head WHERE (dept_head IS NULL OR dept_head = '') AND head IS NOT NULL"
        )
        for id in old {
            try await db.run("DELETE FROM sys_dictionary WHERE sys_id = " + .bind(id))
            try await db.run("DELETE FROM sys_metadata WHERE sys_id = " + .bind(id))
        }
        try await db.run("ALTER TABLE cmn_department DROP COLUMN head")
    }

    /// `sys_metadata` lists the application files: one row per table and per dictionary entry, sharing its
    /// sys_id (on an instance those tables extend `sys_metadata`). Rows for new definitions are added on start.
    private static func syncMetadataFiles(_ db: SQLExecutor) async throws {
        let common: SQLFragment = "'global', 'global', '', sys_created_on, sys_created_by, sys_updated_on, sys_updated_by, 0"
        let columns: SQLFragment =
            "INSERT INTO sys_metadata (sys_id, sys_name, sys_update_name, sys_package, sys_scope, sys_policy, sys_created_on,"
            + " sys_created_by, sys_updated_on, sys_updated_by, sys_mod_count) "
        try await db.run(
            columns + "SELECT sys_id, label, 'sys_db_object_' || name, " + common
                + " FROM sys_db_object AS o WHERE NOT EXISTS (SELECT 1 FROM sys_metadata AS m WHERE m.sys_id = o.sys_id)"
        )
        try await db.run(
            columns + "SELECT sys_id, COALESCE(column_label, element), 'sys_dictionary_' || name || '_' || element, "
                + common + " FROM sys_dictionary AS d WHERE NOT EXISTS (SELECT 1 FROM sys_metadata AS m WHERE m.sys_id = d.sys_id)"
        )
    }

    /// Fields added to existing base tables by a newer version: their dictionary rows, and columns.
    private static func addMissingBaseFields(_ db: SQLExecutor, now: String, skipping newTables: Set<String>) async throws {
        var present = Set<String>()
        for row in try await db.rows("SELECT name, element FROM sys_dictionary") {
            present.insert((try row.value(at: "name", kind: .text).text ?? "") + "." + (try row.value(at: "element", kind: .text).text ?? ""))
        }
        var added = false
        for table in BaseSchema.tables where !newTables.contains(table.name) {
            for field in table.ownFields where !present.contains(table.name + "." + field.name) {
                try await insertDictionaryRow(table: table.name, field: field, db: db, now: now)
                added = true
            }
        }
        guard added else { return }
        let catalog = SchemaCatalog(tables: BaseSchema.tables, choices: [:])
        for root in catalog.roots where !newTables.contains(root.name) {
            try await addMissingColumns(root, catalog: catalog, db: db)
        }
    }

    /// Adds the columns the catalog has for a hierarchy and its physical table lacks (new fields).
    static func addMissingColumns(_ root: SchemaCatalog.Table, catalog: SchemaCatalog, db: SQLExecutor) async throws {
        var present = Set<String>()
        for row in try await db.rows(db.dialect.columnNames(of: root.physicalTable)) {
            if let name = try row.value(at: "name", kind: .text).text { present.insert(name) }
        }
        for field in catalog.physicalColumns(root: root.name) where !present.contains(field.name) {
            try await db.run(
                "ALTER TABLE " + .identifier(root.physicalTable) + " ADD COLUMN " + .identifier(field.name) + " "
                    + SQLFragment(columnType(field, dialect: db.dialect))
            )
        }
    }

    private static func columnType(_ field: FieldDefinition, dialect: StorageDialect) -> String {
        switch field.columnKind {
        case .integer: return dialect.integerType
        case .real: return dialect.realType
        case .text: return dialect.textType
        }
    }

    static func createPhysicalTable(_ root: SchemaCatalog.Table, catalog: SchemaCatalog, db: SQLExecutor)
        async throws
    {
        let columns = catalog.physicalColumns(root: root.name).map { field -> SQLFragment in
            .identifier(field.name) + " " + SQLFragment(columnType(field, dialect: db.dialect))
                + (field.name == "sys_id" ? " PRIMARY KEY NOT NULL" : "")
        }
        try await db.run("CREATE TABLE " + .identifier(root.physicalTable) + " (" + columns.joined(", ") + ")")
        try await createOrderIndex(root.physicalTable, hierarchy: root.isInHierarchy, db: db)
        for (index, columns) in root.definition.indexes.enumerated() {
            try await db.run(
                "CREATE INDEX " + .identifier("ix_\(root.physicalTable)_\(index)") + " ON "
                    + .identifier(root.physicalTable) + " (" + columns.map { SQLFragment.identifier($0) }.joined(", ")
                    + ")"
            )
        }
        try await createCaseInsensitiveIndexes(root, db: db)
    }

    /// Strings are compared without regard to case (``QueryCompiler/comparesWithoutCase(_:)``): each indexed string
    /// column that leads an index also gets an index on LOWER(column), so `number=inc0010001` is a lookup.
    static func createCaseInsensitiveIndexes(_ root: SchemaCatalog.Table, db: SQLExecutor) async throws {
        for columns in root.definition.indexes {
            guard let first = columns.first, let field = root.field(first), QueryCompiler.comparesWithoutCase(field)
            else { continue }
            try await db.run(
                "CREATE INDEX IF NOT EXISTS " + .identifier("ix_\(root.physicalTable)_lower_\(first)") + " ON "
                    + .identifier(root.physicalTable) + " (LOWER(" + .identifier(first) + "))"
            )
        }
    }

    /// The LOWER(column) indexes for databases made before strings compared without case.
    private static func ensureCaseInsensitiveIndexes(_ db: SQLExecutor) async throws {
        let catalog = SchemaCatalog(tables: BaseSchema.tables, choices: [:])
        var existing = Set<String>()
        for row in try await db.rows("SELECT name FROM sys_db_object WHERE super_class IS NULL") {
            if let name = try row.value(at: "name", kind: .text).text { existing.insert(name) }
        }
        for root in catalog.roots where existing.contains(root.name) {
            try await createCaseInsensitiveIndexes(root, db: db)
        }
    }

    /// The default list order (creation time, then sys_id) needs an index with both columns, or every page
    /// of a list sorts the whole table. On a hierarchy the class is added, so that the class filter, the
    /// rows skipped by an offset and the count are all answered from the index.
    static func createOrderIndex(_ table: String, hierarchy: Bool, db: SQLExecutor) async throws {
        try await db.run(
            "CREATE INDEX IF NOT EXISTS " + .identifier("ix_\(table)_order") + " ON " + .identifier(table)
                + (hierarchy ? " (sys_created_on, sys_id, sys_class_name)" : " (sys_created_on, sys_id)")
        )
    }

    /// Adds the order index to databases created before it existed.
    private static func ensureOrderIndexes(_ db: SQLExecutor) async throws {
        for row in try await db.rows("SELECT name, is_extendable FROM sys_db_object WHERE super_class IS NULL") {
            guard let name = try row.value(at: "name", kind: .text).text, SQLFragment.isPlain(name) else { continue }
            let hierarchy = try row.value(at: "is_extendable", kind: .integer).intValue == 1
            try await createOrderIndex(name, hierarchy: hierarchy, db: db)
        }
    }

    private static func insertDictionaryRow(table: String, field: FieldDefinition, db: SQLExecutor, now: String)
        async throws
    {
        try await insertMetadataRow("sys_dictionary", [
            ("name", .text(table)), ("element", .text(field.name)),
            ("column_label", .text(field.label)), ("internal_type", .text(field.type.rawValue)),
            ("reference", field.reference.map(SQLValue.text) ?? .null),
            ("max_length", .integer(field.maxLength)), ("mandatory", .integer(field.mandatory ? 1 : 0)),
            ("read_only", .integer(field.readOnly ? 1 : 0)), ("active", .integer(1)),
            ("display", .integer(field.isDisplay ? 1 : 0)),
            ("default_value", field.defaultValue.map(SQLValue.text) ?? .null),
        ], id: SysID.stable("sys_dictionary:\(table).\(field.name)"), db: db, now: now)
    }

    /// Inserts a metadata row with its system fields.
    static func insertMetadataRow(
        _ table: String, _ values: [(String, SQLValue)], id: String, db: SQLExecutor, now: String
    ) async throws {
        let all: [(String, SQLValue)] = values + [
            ("sys_id", .text(id)), ("sys_created_on", .text(now)), ("sys_created_by", .text("system")),
            ("sys_updated_on", .text(now)), ("sys_updated_by", .text("system")), ("sys_mod_count", .integer(0)),
        ]
        try await db.run(
            "INSERT INTO " + .identifier(table) + " (" + all.map { SQLFragment.identifier($0.0) }.joined(", ")
                + ") VALUES (" + all.map(\.1.fragment).joined(", ") + ")"
        )
    }

    /// Writes the `sys_db_object`, `sys_dictionary`, `sys_number` and `sys_choice` rows of tables.
    private static func writeMetadata(
        _ tables: [TableDefinition], choices: [(String, String, [(String, String)])], db: SQLExecutor, now: String
    ) async throws {
        func insert(_ table: String, _ values: [(String, SQLValue)], id: String) async throws {
            try await insertMetadataRow(table, values, id: id, db: db, now: now)
        }
        for table in tables {
            try await insert("sys_db_object", [
                ("name", .text(table.name)), ("label", .text(table.label)),
                ("super_class", table.parent.map { .text(SysID.stable("sys_db_object:" + $0)) } ?? .null),
                ("is_extendable", .integer(table.isExtendable ? 1 : 0)),
            ], id: SysID.stable("sys_db_object:" + table.name))
            let system = table.parent == nil ? SystemFields.definitions(for: table.name, extensible: table.isExtendable) : []
            for field in system + table.ownFields {
                try await insertDictionaryRow(table: table.name, field: field, db: db, now: now)
            }
            if let prefix = table.numberPrefix {
                try await insert("sys_number", [
                    ("category", .text(table.name)), ("prefix", .text(prefix)),
                    ("number", .integer(table.numberStart)), ("maximum_digits", .integer(table.numberDigits)),
                ], id: SysID.stable("sys_number:" + table.name))
                try await db.run(
                    "INSERT INTO docket_number_counter (table_name, next_value) VALUES (" + .bind(table.name) + ", "
                        + .bind(table.numberStart) + ")"
                )
            }
        }
        for (table, field, list) in choices {
            for (index, (value, label)) in list.enumerated() {
                try await insert("sys_choice", [
                    ("name", .text(table)), ("element", .text(field)), ("value", .text(value)),
                    ("label", .text(label)), ("sequence", .integer(index * 10)), ("inactive", .integer(0)),
                    ("language", .text("en")),
                ], id: SysID.stable("sys_choice:\(table).\(field).\(value)"))
            }
        }
    }
}
