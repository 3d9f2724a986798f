import Foundation
import DocketModel

/// Schema changes made by writing metadata records, as on a ServiceNow instance: inserting into
/// `sys_db_object` creates a table (a physical table for a new root, nothing more for a table that extends
/// one), inserting into `sys_dictionary` adds a column. Both run inside the insert's transaction, so a
/// rejected change leaves nothing behind; the store reloads its catalog after the commit.
enum SchemaAdministration {
    static let tables: Set<String> = ["sys_db_object", "sys_dictionary"]

    /// Fields that define structure and cannot change once created.
    private static let structural: [String: Set<String>] = [
        "sys_db_object": ["name", "super_class", "is_extendable"],
        "sys_dictionary": ["name", "element", "internal_type", "reference"],
    ]

    /// Types a new field may have (system types are reserved for system fields).
    private static let creatableTypes: Set<FieldType> = [
        .string, .integer, .decimal, .boolean, .glideDateTime, .glideDate, .reference, .choice, .journal,
        .glideList, .password,
    ]

    static func apply(inserted values: [String: String], into table: String, catalog: SchemaCatalog, db: SQLExecutor)
        async throws
    {
        switch table {
        case "sys_db_object": try await createTable(values, catalog: catalog, db: db)
        case "sys_dictionary": try await addField(values, catalog: catalog, db: db)
        default: break
        }
    }

    static func checkUpdate(of table: String, changed: Set<String>) throws {
        let locked = changed.intersection(structural[table] ?? [])
        guard locked.isEmpty else {
            throw EngineError.badRequest(
                "Operation Failed", detail: "\(locked.sorted().joined(separator: ", ")) cannot be changed after creation"
            )
        }
    }

    /// Lower-case letters, digits and underscores, starting with a letter: safe as an SQL identifier.
    static func isValidName(_ name: String) -> Bool {
        guard let first = name.utf8.first, (97...122).contains(first), name.utf8.count <= 80 else { return false }
        return name.utf8.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 95 }
    }

    private static func isCustom(_ name: String) -> Bool { name.hasPrefix("u_") || name.hasPrefix("x_") }

    private static func createTable(_ values: [String: String], catalog: SchemaCatalog, db: SQLExecutor) async throws {
        let name = values["name", default: ""]
        guard isValidName(name), isCustom(name) else {
            throw EngineError.badRequest(
                "Invalid table name '\(name)'",
                detail: "New table names start with u_ (or x_ for applications) followed by lower-case letters, digits or _"
            )
        }
        guard catalog.table(name) == nil else { throw EngineError.badRequest("Table \(name) already exists") }
        let sysID = values["sys_id", default: ""]
        if let parentValue = values["super_class"], !parentValue.isEmpty {
            // The parent may be given by sys_id (as ServiceNow stores it) or by name.
            guard let row = try await db.rows(
                "SELECT sys_id, name FROM sys_db_object WHERE sys_id = " + .bind(parentValue) + " OR name = "
                    + .bind(parentValue) + " LIMIT 1"
            ).first, let parentName = try row.value(at: "name", kind: .text).text,
                let parent = catalog.table(parentName), let parentID = try row.value(at: "sys_id", kind: .text).text
            else { throw EngineError.badRequest("Invalid super_class '\(parentValue)'", detail: "No such table") }
            guard parent.definition.isExtendable || parent.isInHierarchy else {
                throw EngineError.badRequest("Table \(parentName) cannot be extended")
            }
            try await db.run(
                "UPDATE sys_db_object SET super_class = " + .bind(parentID) + " WHERE sys_id = " + .bind(sysID)
            )
        }
        if values["label", default: ""].isEmpty {
            try await db.run("UPDATE sys_db_object SET label = " + .bind(name) + " WHERE sys_id = " + .bind(sysID))
        }
        let updated = try await SchemaStore.loadCatalog(db: db)
        guard let table = updated.table(name), let root = updated.table(table.root) else {
            throw EngineError.badRequest("Invalid table \(name)")
        }
        if root.name == name {
            try await SchemaStore.createPhysicalTable(table, catalog: updated, db: db)
            // The role that grants access to the new table; admins give it to users through sys_user_has_role.
            if let role = AccessPolicy.customTableRole(name),
                try await db.integer("SELECT COUNT(*) FROM sys_user_role WHERE name = " + .bind(role)) == 0
            {
                try await SchemaStore.insertMetadataRow(
                    "sys_user_role",
                    [("name", .text(role)), ("description", .text("Read and write records of \(name)"))],
                    id: SysID.generate(), db: db, now: GlideDateTime.format(Date())
                )
            }
        } else {
            try await SchemaStore.addMissingColumns(root, catalog: updated, db: db)
        }
    }

    private static func addField(_ values: [String: String], catalog: SchemaCatalog, db: SQLExecutor) async throws {
        let tableName = values["name", default: ""]
        let element = values["element", default: ""]
        // ServiceNow keeps a dictionary row without element for the table itself; nothing to build for it.
        if element.isEmpty { return }
        guard let table = catalog.table(tableName) else {
            throw EngineError.badRequest("Invalid table '\(tableName)'", detail: "sys_dictionary.name must name a table")
        }
        guard isValidName(element), isCustom(tableName) || isCustom(element) else {
            throw EngineError.badRequest(
                "Invalid column name '\(element)'",
                detail: "Column names are lower-case letters, digits or _; on base tables they start with u_"
            )
        }
        guard catalog.hierarchyField(element, in: table) == nil, table.field(element) == nil,
            !SystemFields.names.contains(element)
        else { throw EngineError.badRequest("Column \(element) already exists on \(tableName)") }
        let typeName = values["internal_type", default: ""].isEmpty ? "string" : values["internal_type", default: ""]
        guard let type = FieldType(rawValue: typeName), creatableTypes.contains(type) else {
            throw EngineError.badRequest(
                "Invalid internal_type '\(typeName)'",
                detail: "Use one of " + creatableTypes.map(\.rawValue).sorted().joined(separator: ", ")
            )
        }
        let sysID = values["sys_id", default: ""]
        if type == .reference {
            let target = values["reference", default: ""]
            guard catalog.table(target) != nil else {
                throw EngineError.badRequest("Invalid reference '\(target)'", detail: "A reference field needs a target table")
            }
        }
        if values["internal_type", default: ""].isEmpty {
            try await db.run("UPDATE sys_dictionary SET internal_type = 'string' WHERE sys_id = " + .bind(sysID))
        }
        if values["column_label", default: ""].isEmpty {
            try await db.run("UPDATE sys_dictionary SET column_label = " + .bind(element) + " WHERE sys_id = " + .bind(sysID))
        }
        let updated = try await SchemaStore.loadCatalog(db: db)
        guard let root = updated.table(table.root) else { return }
        try await SchemaStore.addMissingColumns(root, catalog: updated, db: db)
    }
}
