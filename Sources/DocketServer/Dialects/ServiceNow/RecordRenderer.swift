import DocketModel

/// Shapes engine records as Table API JSON (spec §0.6–§0.7): every value a string; references as
/// `{link, value}`; `display_value` modes; journal fields as the rendered stream.
struct RecordRenderer {
    let catalog: SchemaCatalog
    let mode: DisplayMode
    let excludeReferenceLink: Bool
    /// Instance base URL without a trailing slash, for reference links.
    let baseURL: String
    let data: DisplayData

    func render(_ record: Record, columns: [ResultColumn]) -> JSONValue {
        let recordTable = catalog.table(record.table)
        return .object(columns.map { column in
            (column.name, render(column, value: record[column.name], record: record, recordTable: recordTable))
        })
    }

    private func render(
        _ column: ResultColumn, value: String, record: Record, recordTable: SchemaCatalog.Table?
    ) -> JSONValue {
        let field = column.field
        if field.type == .reference {
            return renderReference(field, value: value)
        }
        guard mode != .value else { return .string(value) }
        let display = displayValue(column, value: value, record: record, recordTable: recordTable)
        if mode == .display { return .string(display) }
        return .object([("display_value", .string(display)), ("value", .string(value))])
    }

    private func renderReference(_ field: FieldDefinition, value: String) -> JSONValue {
        let link = "\(baseURL)/api/now/table/\(field.reference ?? "")/\(value)"
        let display = data.referenceDisplay(value, in: field.reference)
        switch mode {
        case .value:
            if value.isEmpty || excludeReferenceLink { return .string(value) }
            return .object([("link", .string(link)), ("value", .string(value))])
        case .display:
            if value.isEmpty || excludeReferenceLink { return .string(display) }
            return .object([("display_value", .string(display)), ("link", .string(link))])
        case .all:
            if value.isEmpty || excludeReferenceLink {
                return .object([("display_value", .string(display)), ("value", .string(value))])
            }
            return .object([("display_value", .string(display)), ("link", .string(link)), ("value", .string(value))])
        }
    }

    private func displayValue(
        _ column: ResultColumn, value: String, record: Record, recordTable: SchemaCatalog.Table?
    ) -> String {
        let field = column.field
        switch field.type {
        case .journal:
            return journalStream(record.sysID, field: field)
        case .tableName:
            return catalog.table(value)?.label ?? value
        default:
            guard !value.isEmpty else { return "" }
            // A record's own fields use its concrete class's choice list (incident states, not task states).
            let isOwnField = !column.name.contains(".")
            let table = isOwnField ? (recordTable ?? catalog.table(field.table)) : catalog.table(field.table)
            if let table, let label = catalog.choiceLabel(value, field: field.name, in: table) { return label }
            return value
        }
    }

    /// Newest first: `YYYY-MM-DD HH:MM:SS - Name (Label)\ntext\n\n` per entry.
    private func journalStream(_ sysID: String, field: FieldDefinition) -> String {
        var stream = ""
        for entry in data.journals[sysID] ?? [] where entry.element == field.name {
            stream += "\(entry.createdOn) - \(entry.createdByName ?? entry.createdBy) (\(field.label))\n\(entry.value)\n\n"
        }
        return stream
    }
}
