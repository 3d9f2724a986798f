import DocketModel
import Foundation
import SQLKit

/// Reading the catalog (tables, fields, choices, state models) from the metadata tables.
extension SchemaStore {
    /// Reads the catalog from the metadata tables.
    static func loadCatalog(_ storage: any Storage) async throws -> SchemaCatalog {
        try await storage.read { db in try await loadCatalog(db: db) }
    }

    /// Reads the catalog on a given connection (inside a transaction it sees that transaction's changes).
    static func loadCatalog(db: SQLExecutor) async throws -> SchemaCatalog {
        do {
            let tableRows = try await db.rows(
                "SELECT sys_id, name, label, super_class, is_extendable FROM sys_db_object ORDER BY name"
            )
            var namesByID: [String: String] = [:]
            var raw: [(name: String, label: String, parentID: String?, extensible: Bool)] = []
            for row in tableRows {
                let id = try row.value(at: "sys_id", kind: .text).text ?? ""
                let name = try row.value(at: "name", kind: .text).text ?? ""
                namesByID[id] = name
                raw.append((
                    name, try row.value(at: "label", kind: .text).text ?? name,
                    try row.value(at: "super_class", kind: .text).text,
                    try row.value(at: "is_extendable", kind: .integer).intValue == 1
                ))
            }
            var fieldsByTable: [String: [FieldDefinition]] = [:]
            for row in try await db.rows(
                """
                SELECT name, element, column_label, internal_type, reference, max_length, mandatory, read_only,
                display, default_value FROM sys_dictionary WHERE active = 1 ORDER BY name, element
                """
            ) {
                let element = try row.value(at: "element", kind: .text).text ?? ""
                let table = try row.value(at: "name", kind: .text).text ?? ""
                guard !element.isEmpty, !SystemFields.names.contains(element),
                    let type = FieldType(rawValue: try row.value(at: "internal_type", kind: .text).text ?? "")
                else { continue }
                fieldsByTable[table, default: []].append(
                    FieldDefinition(
                        table: table, name: element,
                        label: try row.value(at: "column_label", kind: .text).text ?? element, type: type,
                        reference: try row.value(at: "reference", kind: .text).text,
                        maxLength: try row.value(at: "max_length", kind: .integer).intValue ?? 255,
                        mandatory: try row.value(at: "mandatory", kind: .integer).intValue == 1,
                        readOnly: try row.value(at: "read_only", kind: .integer).intValue == 1,
                        defaultValue: try row.value(at: "default_value", kind: .text).text,
                        isDisplay: try row.value(at: "display", kind: .integer).intValue == 1
                    )
                )
            }
            var numbering: [String: (String, Int)] = [:]
            var digits: [String: Int] = [:]
            for row in try await db.rows("SELECT category, prefix, number, maximum_digits FROM sys_number") {
                if let table = try row.value(at: "category", kind: .text).text,
                    let prefix = try row.value(at: "prefix", kind: .text).text
                {
                    numbering[table] = (prefix, try row.value(at: "number", kind: .integer).intValue ?? 10001)
                    digits[table] = try row.value(at: "maximum_digits", kind: .integer).intValue
                }
            }
            var choices: [String: ChoiceLists] = [:]
            for row in try await db.rows(
                "SELECT name, element, value, label, sequence FROM sys_choice WHERE inactive = 0 ORDER BY sequence"
            ) {
                guard let table = try row.value(at: "name", kind: .text).text,
                    let element = try row.value(at: "element", kind: .text).text
                else { continue }
                choices[table, default: [:]][element, default: []].append(
                    ChoiceDefinition(
                        value: try row.value(at: "value", kind: .text).text ?? "",
                        label: try row.value(at: "label", kind: .text).text ?? "",
                        sequence: try row.value(at: "sequence", kind: .integer).intValue ?? 0
                    )
                )
            }
            let definitions = raw.map { entry in
                TableDefinition(
                    name: entry.name, label: entry.label, parent: entry.parentID.flatMap { namesByID[$0] },
                    isExtendable: entry.extensible, numberPrefix: numbering[entry.name]?.0,
                    numberStart: numbering[entry.name]?.1 ?? 10001,
                    numberDigits: min(max(digits[entry.name] ?? 7, 1), 18), ownFields: fieldsByTable[entry.name] ?? []
                )
            }
            // A database being upgraded has no workflow tables until the base-tables step has run.
            let models = try await db.rows(db.dialect.tableExists("sys_wf_state")).isEmpty
                ? [:] : try await StateModel.load(db: db)
            return SchemaCatalog(tables: definitions, choices: choices, stateModels: models)
        }
    }
}
