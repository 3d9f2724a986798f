import DocketModel

/// A reference the user typed that matches no record, or several.
struct ReferenceProblem: Error {
    let field: String
    let message: String
}

/// Reference lookups for forms, through the caller's access rules (unlike the Table API's display-value writes,
/// ``storedValue(forDisplay:field:in:)``, which keep ServiceNow's behaviour: the first match, or the text as given).
extension RecordStore {
    /// The sys_id a reference field's text names: the record's display value ("Beth Anglin"), a user's
    /// "Name (user_name)" or user name, or a sys_id. Looked up with the caller's access rules. Text equal to
    /// `keeping.display` keeps `keeping.value`.
    func resolveReference(
        _ text: String, field: FieldDefinition, keeping: (value: String, display: String), caller: Caller
    ) async throws -> String {
        let text = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { return "" }
        if text == keeping.display || text == keeping.value { return keeping.value }
        guard let targetName = field.reference, let target = catalog.table(targetName) else { return text }
        var query: EncodedQuery
        if text.count == 32, text.allSatisfy(\.isHexDigit) {
            query = .where("sys_id", .equals, text.lowercased())
        } else if targetName == "sys_user", text.hasSuffix(")"), let open = text.lastIndex(of: "(") {
            let userName = text[text.index(after: open)..<text.index(before: text.endIndex)]
            query = .where("user_name", .equals, String(userName))
        } else if let display = target.displayField {
            query = .where(display, .equals, text)
            if targetName == "sys_user" { query = query.or("user_name", .equals, text) }
        } else {
            query = .where("sys_id", .equals, text)
        }
        let page = try await list(RecordQuery(table: targetName, query: query, fields: ["sys_id"], limit: 2, count: false), caller: caller)
        switch page.records.count {
        case 1: return page.records[0].sysID
        case 0: throw ReferenceProblem(field: field.name, message: "No \(target.label.lowercased()) is called \(text.prefix(80))")
        default:
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
