import DocketModel
import SQLKit

extension RecordStore {
    /// A change made from a standard change template (`std_change_producer_version`) takes the template's field
    /// values (`std_change_record_producer.template`, `field=value^field=value`) for every field the write itself
    /// does not set: what the request says wins. Read in the write's transaction.
    func applyStandardChangeTemplate(
        on table: SchemaCatalog.Table, values: inout [String: String], given: Set<String>, db: SQLExecutor
    ) async throws {
        guard table.ancestry.contains("change_request"), let version = values["std_change_producer_version"],
            !version.isEmpty
        else { return }
        let rows = try await db.rows(
            "SELECT p.template AS template FROM std_change_producer_version AS v JOIN std_change_record_producer AS p"
                + " ON p.sys_id = v.std_change_producer WHERE v.sys_id = " + .bind(version)
        )
        guard let template = try rows.first?.value(at: "template", kind: .text).text else { return }
        for (field, value) in Self.templateValues(template) where !given.contains(field) {
            guard let definition = table.field(field), definition.type.isStored, !SystemFields.names.contains(field)
            else { continue }
            values[field] = value
        }
        if !given.contains("type") { values["type"] = "standard" }
    }

    /// `field=value^field=value` as pairs (a value may itself contain `=`).
    static func templateValues(_ template: String) -> [(String, String)] {
        template.split(separator: "^", omittingEmptySubsequences: true).compactMap { part in
            guard let equals = part.firstIndex(of: "=") else { return nil }
            let field = part[..<equals].trimmingCharacters(in: .whitespaces)
            return field.isEmpty ? nil : (field, String(part[part.index(after: equals)...]))
        }
    }
}
