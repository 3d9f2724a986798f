import DocketModel

/// A reference the user typed that matches no record, or several.
struct ReferenceProblem: Error {
    let field: String
    let message: String
}

/// What a reference field's written value names.
enum ReferenceMatch: Sendable {
    /// One record: its sys_id.
    case one(String)
    /// None; records whose names are like it, as "Name (user_name)" or the display value.
    case none(suggestions: [String])
    /// Several, as "Name (user_name)" or "display value (sys_id)".
    case several([String])
}

/// Reference values: the one rule every write follows (``RecordStore/referenceValue(_:field:caller:)``), and the
/// lookups of the web UI's forms.
extension RecordStore {
    /// Tables whose records are also named by another field than their display value.
    static let referenceKeys: [String: String] = ["sys_user": "user_name", "sys_db_object": "name"]

    /// The value to store in a reference field for what a writer sent, the same for every write, create or update,
    /// in every dialect (ServiceNow resolves a reference given by its display value too): the sys_id of an existing
    /// record of the target table stays as it is; anything else names a record by its display value ("Beth
    /// Anglin"), a user also by user name or "Name (user_name)", a table also by name, looked up with the writer's
    /// read access. A value that names no record, or several, is refused with the candidates and never stored.
    func referenceValue(_ raw: String, field: FieldDefinition, caller: Caller) async throws -> String {
        let text = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty, let targetName = field.reference, let target = catalog.table(targetName) else { return raw }
        switch try await matchReference(text, target: target, caller: caller) {
        case .one(let sysID):
            return sysID
        case .none(let suggestions):
            throw EngineError.badRequest(
                "Invalid value for field '\(field.name)'",
                detail: "No \(target.label.lowercased()) is called '\(text.prefix(80))'"
                    + (suggestions.isEmpty ? "" : "; did you mean " + suggestions.joined(separator: ", ") + "?"),
                field: field.name
            )
        case .several(let candidates):
            throw EngineError.badRequest(
                "Invalid value for field '\(field.name)'",
                detail: "'\(text.prefix(80))' names \(candidates.count) records of \(target.name): "
                    + candidates.joined(separator: ", ") + "; give the sys_id"
                    + (Self.referenceKeys[target.name].map { " or the \($0)" } ?? ""),
                field: field.name
            )
        }
    }

    /// What `text` names in `target`: an existing record's sys_id (whoever may read it), else records whose display
    /// value or other name is `text` that the caller may read.
    func matchReference(_ text: String, target: SchemaCatalog.Table, caller: Caller) async throws -> ReferenceMatch {
        if SysID.isValid(text), try await exists(text, in: target) { return .one(text) }
        let key = Self.referenceKeys[target.name]
        var query: EncodedQuery? = nil
        if let key, text.hasSuffix(")"), let open = text.lastIndex(of: "(") {
            let name = text[text.index(after: open)..<text.index(before: text.endIndex)]
            query = .where(key, .equals, String(name))
        } else if let display = target.displayField {
            query = .where(display, .equals, text)
            if let key { query = query?.or(key, .equals, text) }
        } else if let key {
            query = .where(key, .equals, text)
        }
        guard let query else { return .none(suggestions: []) }
        let found = try await list(
            RecordQuery(table: target.name, query: query, fields: nameFields(of: target), limit: 6, count: false),
            caller: caller
        ).records
        switch found.count {
        case 1: return .one(found[0].sysID)
        case 0:
            let like = try await lookup(String(text.prefix(80)), in: target.name, caller: caller)
            return .none(suggestions: like.prefix(5).map(\.label))
        default:
            return .several(found.map { describe($0, in: target) })
        }
    }

    /// Whether a record with this sys_id exists in the table (or a table below it), whoever may read it.
    private func exists(_ sysID: String, in table: SchemaCatalog.Table) async throws -> Bool {
        var query: SQLFragment = "SELECT COUNT(*) FROM " + .identifier(table.physicalTable) + " WHERE sys_id = " + .bind(sysID)
        if table.root != table.name { query = query + " AND sys_class_name IN (" + .bindList(table.descendants) + ")" }
        let statement = query
        return try await storage.read { db in try await db.integer(statement) } > 0
    }

    private func nameFields(of table: SchemaCatalog.Table) -> [String] {
        ["sys_id"] + [table.displayField, Self.referenceKeys[table.name]].compactMap { $0 }
    }

    /// "Beth Anglin (beth.anglin)" for a user, "Label (name)" for a table, "display value (sys_id)" otherwise.
    private func describe(_ record: Record, in table: SchemaCatalog.Table) -> String {
        let display = table.displayField.map { record[$0] } ?? ""
        if let key = Self.referenceKeys[table.name], !record[key].isEmpty { return "\(display) (\(record[key]))" }
        return display.isEmpty ? record.sysID : "\(display) (\(record.sysID))"
    }

    /// The sys_id a web form's reference text names (see ``matchReference(_:target:caller:)``); text equal to
    /// `keeping.display` keeps `keeping.value`.
    func resolveReference(
        _ text: String, field: FieldDefinition, keeping: (value: String, display: String), caller: Caller
    ) async throws -> String {
        let text = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { return "" }
        if text == keeping.display || text == keeping.value { return keeping.value }
        guard let targetName = field.reference, let target = catalog.table(targetName) else { return text }
        switch try await matchReference(text, target: target, caller: caller) {
        case .one(let sysID): return sysID
        case .none:
            throw ReferenceProblem(field: field.name, message: "No \(target.label.lowercased()) is called \(text.prefix(80))")
        case .several:
            throw ReferenceProblem(field: field.name, message: "More than one \(target.label.lowercased()) is called \(text.prefix(80)); choose one from the list")
        }
    }

    /// Up to ten records of a table whose display value (or, for users, user name) contains `text`, for type-ahead.
    func lookup(_ text: String, in tableName: String, caller: Caller) async throws -> [(sysID: String, label: String)] {
        let table = try table(tableName)
        guard let display = table.displayField else { return [] }
        let words = String(text.prefix(80))
        var query = EncodedQuery.where(display, .like, words)
        var fields = ["sys_id", display]
        if tableName == "sys_user" {
            query = query.or("user_name", .like, words).and("active", .equals, "true")
            fields.append("user_name")
        }
        let page = try await list(
            RecordQuery(table: tableName, query: query.orderBy(display), fields: fields, limit: 10, count: false), caller: caller
        )
        return page.records.map { record in
            let name = record[display]
            return (record.sysID, tableName == "sys_user" && !record["user_name"].isEmpty ? "\(name) (\(record["user_name"]))" : name)
        }
    }
}
