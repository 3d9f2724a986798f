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

    /// The choice labels of each column, per record class, worked out once per renderer (a page's records are
    /// mostly of one class): rendering a cell is then one lookup, not a walk up the class's ancestry.
    let labels = ColumnLabels()

    /// Writes one record as a JSON object.
    func write(_ record: Record, columns: [ResultColumn], to writer: inout JSONWriter) {
        let recordTable = catalog.table(record.table)
        let columnLabels = mode == .value ? [] : labels.lists(for: record.table, columns: columns, recordTable: recordTable, catalog: catalog)
        writer.beginObject()
        for (index, column) in columns.enumerated() {
            writer.key(encoded: column.jsonKey)
            write(
                column, value: record[column.name], record: record, recordTable: recordTable,
                labels: index < columnLabels.count ? columnLabels[index] : nil, to: &writer
            )
        }
        writer.endObject()
    }

    private func write(
        _ column: ResultColumn, value: String, record: Record, recordTable: SchemaCatalog.Table?,
        labels: [String: String]?, to writer: inout JSONWriter
    ) {
        if column.field.type == .reference {
            writeReference(column.field, value: value, to: &writer)
            return
        }
        guard mode != .value else { return writer.string(value) }
        let display = displayValue(column, value: value, record: record, recordTable: recordTable, labels: labels)
        if mode == .display { return writer.string(display) }
        writer.beginObject()
        writer.key(encoded: Self.displayValueKey)
        writer.string(display)
        writer.key(encoded: Self.valueKey)
        writer.string(value)
        writer.endObject()
    }

    static let displayValueKey = JSONWriter.encodedKey("display_value")
    static let valueKey = JSONWriter.encodedKey("value")
    static let linkKey = JSONWriter.encodedKey("link")

    private func writeReference(_ field: FieldDefinition, value: String, to writer: inout JSONWriter) {
        let withLink = !value.isEmpty && !excludeReferenceLink
        let display = mode == .value ? "" : data.referenceDisplay(value, in: field.reference)
        func link() {
            writer.key(encoded: Self.linkKey)
            writer.string(prefix: labels.linkPrefix(baseURL: baseURL, table: field.reference ?? ""), value)
        }
        switch mode {
        case .value:
            guard withLink else { return writer.string(value) }
            writer.beginObject()
            link()
            writer.key(encoded: Self.valueKey)
            writer.string(value)
            writer.endObject()
        case .display:
            guard withLink else { return writer.string(display) }
            writer.beginObject()
            writer.key(encoded: Self.displayValueKey)
            writer.string(display)
            link()
            writer.endObject()
        case .all:
            writer.beginObject()
            writer.key(encoded: Self.displayValueKey)
            writer.string(display)
            if withLink { link() }
            writer.key(encoded: Self.valueKey)
            writer.string(value)
            writer.endObject()
        }
    }

    /// The display value of a column of a record (references included), as `sysparm_display_value=true` shows it.
    func displayValue(of column: ResultColumn, in record: Record) -> String {
        let value = record[column.name]
        if column.field.type == .reference { return data.referenceDisplay(value, in: column.field.reference) }
        let recordTable = catalog.table(record.table)
        let table = ColumnLabels.choiceTable(of: column, recordTable: recordTable, catalog: catalog)
        let labels = table.flatMap { catalog.choices(for: column.field.name, in: $0) }.map(ColumnLabels.map)
        return displayValue(column, value: value, record: record, recordTable: recordTable, labels: labels)
    }

    private func displayValue(
        _ column: ResultColumn, value: String, record: Record, recordTable: SchemaCatalog.Table?, labels: [String: String]?
    ) -> String {
        switch column.field.type {
        case .journal:
            return journalStream(record.sysID, field: column.field, recordTable: recordTable)
        case .tableName:
            return catalog.table(value)?.label ?? value
        case .glideDateTime:
            return local(value)
        default:
            guard !value.isEmpty, let labels else { return value }
            return labels[value] ?? value
        }
    }

    /// A stored UTC date-time as the caller's local time.
    private func local(_ value: String) -> String {
        guard let timeZone, let date = GlideDateTime.parse(value) else { return value }
        return GlideDateTime.format(date.addingTimeInterval(TimeInterval(labels.offset(of: timeZone, at: date))))
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

/// What a renderer works out once and uses for every record: each column's choice labels (value → label) for
/// records of one class, reference link prefixes, and time zone offsets.
final class ColumnLabels: @unchecked Sendable {
    // One renderer renders one answer, on one task at a time; the lock only keeps a shared renderer safe.
    private let lock = NSLock()
    private var byTable: [String: (names: [String], lists: [[String: String]?])] = [:]
    private var links: [String: [UInt8]] = [:]
    private var offsets: [Int: Int] = [:]
    private var offsetsZone: TimeZone? = nil

    /// `https://host/api/now/table/TABLE/`, escaped for a JSON string, for ``JSONWriter/string(prefix:_:)``.
    func linkPrefix(baseURL: String, table: String) -> [UInt8] {
        lock.lock()
        defer { lock.unlock() }
        if let known = links[table] { return known }
        var quoted = JSONWriter.encodedKey("\(baseURL)/api/now/table/\(table)/")
        // "…": → …
        quoted.removeFirst()
        quoted.removeLast(2)
        links[table] = quoted
        return quoted
    }

    /// A time zone's offset from UTC at a moment, in seconds. Offsets change at most on quarter hours (every
    /// change since 1970 in the tz database), so one lookup serves each quarter hour.
    func offset(of timeZone: TimeZone, at date: Date) -> Int {
        let quarter = Int((date.timeIntervalSince1970 / 900).rounded(.down))
        lock.lock()
        if offsetsZone != timeZone {
            offsets = [:]
            offsetsZone = timeZone
        }
        if let known = offsets[quarter] {
            lock.unlock()
            return known
        }
        lock.unlock()
        let offset = timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(quarter) * 900))
        lock.lock()
        offsets[quarter] = offset
        lock.unlock()
        return offset
    }

    func lists(
        for table: String, columns: [ResultColumn], recordTable: SchemaCatalog.Table?, catalog: SchemaCatalog
    ) -> [[String: String]?] {
        lock.lock()
        defer { lock.unlock() }
        if let known = byTable[table], known.names.count == columns.count,
            zip(known.names, columns).allSatisfy({ $0 == $1.name })
        {
            return known.lists
        }
        let lists = columns.map { column -> [String: String]? in
            switch column.field.type {
            case .reference, .journal, .tableName, .glideDateTime: return nil
            default:
                guard let choiceTable = Self.choiceTable(of: column, recordTable: recordTable, catalog: catalog) else { return nil }
                return catalog.choices(for: column.field.name, in: choiceTable).map(Self.map)
            }
        }
        byTable[table] = (columns.map(\.name), lists)
        return lists
    }

    /// Where a column's choice list is looked up: a record's own fields use its concrete class's list (incident
    /// states, not task states); a dot-walked field, its own table's.
    static func choiceTable(of column: ResultColumn, recordTable: SchemaCatalog.Table?, catalog: SchemaCatalog) -> SchemaCatalog.Table? {
        column.isDotWalk ? catalog.table(column.field.table) : (recordTable ?? catalog.table(column.field.table))
    }

    /// value → label; the first of equal values wins, as a search of the list in order finds it.
    static func map(_ choices: [ChoiceDefinition]) -> [String: String] {
        var labels: [String: String] = [:]
        for choice in choices where labels[choice.value] == nil { labels[choice.value] = choice.label }
        return labels
    }
}
