import DocketModel
import Foundation

/// Shapes engine records as Table API JSON (spec §0.6–§0.7): every value a string; references as
/// `{link, value}`; `display_value` modes; journal fields as the rendered stream.
struct RecordRenderer {
    let catalog: SchemaCatalog
    let mode: DisplayMode
    let excludeReferenceLink: Bool
    /// Instance base URL without a trailing slash, for reference links.
    let baseURL: String
    let data: DisplayData
    /// The caller's time zone: display values of dates (and journal headers) are local times in it.
    var timeZone: TimeZone? = nil

    /// Writes one record as a JSON object.
    func write(_ record: Record, columns: [ResultColumn], to writer: inout JSONWriter) {
        let recordTable = catalog.table(record.table)
        writer.beginObject()
        for column in columns {
            writer.key(encoded: column.jsonKey)
            write(column, value: record[column.name], record: record, recordTable: recordTable, to: &writer)
        }
        writer.endObject()
    }

    private func write(
        _ column: ResultColumn, value: String, record: Record, recordTable: SchemaCatalog.Table?,
        to writer: inout JSONWriter
    ) {
        let field = column.field
        if field.type == .reference {
            writeReference(field, value: value, to: &writer)
            return
        }
        guard mode != .value else { return writer.string(value) }
        let display = displayValue(column, value: value, record: record, recordTable: recordTable)
        if mode == .display { return writer.string(display) }
        writer.beginObject()
        writer.key("display_value")
        writer.string(display)
        writer.key("value")
        writer.string(value)
        writer.endObject()
    }

    private func writeReference(_ field: FieldDefinition, value: String, to writer: inout JSONWriter) {
        let withLink = !value.isEmpty && !excludeReferenceLink
        let display = mode == .value ? "" : data.referenceDisplay(value, in: field.reference)
        func link() {
            writer.key("link")
            writer.string("\(baseURL)/api/now/table/\(field.reference ?? "")/\(value)")
        }
        switch mode {
        case .value:
            guard withLink else { return writer.string(value) }
            writer.beginObject()
            link()
            writer.key("value")
            writer.string(value)
            writer.endObject()
        case .display:
            guard withLink else { return writer.string(display) }
            writer.beginObject()
            writer.key("display_value")
            writer.string(display)
            link()
            writer.endObject()
        case .all:
            writer.beginObject()
            writer.key("display_value")
            writer.string(display)
            if withLink { link() }
            writer.key("value")
            writer.string(value)
            writer.endObject()
        }
    }

    /// The display value of a column of a record (references included), as `sysparm_display_value=true` shows it.
    func displayValue(of column: ResultColumn, in record: Record) -> String {
        let value = record[column.name]
        if column.field.type == .reference { return data.referenceDisplay(value, in: column.field.reference) }
        return displayValue(column, value: value, record: record, recordTable: catalog.table(record.table))
    }

    private func displayValue(
        _ column: ResultColumn, value: String, record: Record, recordTable: SchemaCatalog.Table?
    ) -> String {
        let field = column.field
        switch field.type {
        case .journal:
            return journalStream(record.sysID, field: field, recordTable: recordTable)
        case .tableName:
            return catalog.table(value)?.label ?? value
        case .glideDateTime:
            return local(value)
        default:
            guard !value.isEmpty else { return "" }
            // A record's own fields use its concrete class's choice list (incident states, not task states).
            let isOwnField = !column.name.contains(".")
            let table = isOwnField ? (recordTable ?? catalog.table(field.table)) : catalog.table(field.table)
            if let table, let label = catalog.choiceLabel(value, field: field.name, in: table) { return label }
            return value
        }
    }

    /// A stored UTC date-time as the caller's local time.
    private func local(_ value: String) -> String {
        guard let timeZone, let date = GlideDateTime.parse(value) else { return value }
        return GlideDateTime.format(date, in: timeZone)
    }

    /// Newest first: `YYYY-MM-DD HH:MM:SS - Name (Label)\ntext\n\n` per entry.
    private func journalStream(_ sysID: String, field: FieldDefinition, recordTable: SchemaCatalog.Table?) -> String {
        let elements = JournalStreams.elements(of: field.name)
        var stream = ""
        for entry in data.journals[sysID] ?? [] where elements.contains(entry.element) {
            let label = entry.element == field.name ? field.label : recordTable?.field(entry.element)?.label ?? entry.element
            stream += "\(local(entry.createdOn)) - \(entry.createdByName ?? entry.createdBy) (\(label))\n\(entry.value)\n\n"
        }
        return stream
    }
}
