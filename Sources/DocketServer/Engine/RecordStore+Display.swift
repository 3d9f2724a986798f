import DocketModel

/// What rendering display values needs beyond the records themselves.
struct DisplayData: Sendable {
    /// Referenced table → sys_id → display value.
    var references: [String: [String: String]] = [:]
    /// Record sys_id → journal entries, newest first.
    var journals: [String: [JournalEntry]] = [:]

    func referenceDisplay(_ id: String, in table: String?) -> String {
        guard let table else { return "" }
        return references[table]?[id] ?? ""
    }
}

extension RecordStore {
    /// Looks up the display values that a page's references and journal fields need; nothing when only raw
    /// values are wanted.
    func displayData(for page: RecordPage, displayValues: Bool, caller: Caller) async throws -> DisplayData {
        guard displayValues else { return DisplayData() }
        var wanted: [String: Set<String>] = [:]
        for column in page.columns where column.field.type == .reference {
            guard let target = column.field.reference else { continue }
            for record in page.records {
                let id = record[column.name]
                if !id.isEmpty { wanted[target, default: []].insert(id) }
            }
        }
        var data = DisplayData()
        data.references = try await self.displayValues(wanted, caller: caller)
        let journalFields = Set(page.columns.filter { $0.field.type == .journal }.flatMap { JournalStreams.elements(of: $0.name) })
        if !journalFields.isEmpty {
            data.journals = try await journalEntries(for: page.records.map(\.sysID), elements: journalFields)
        }
        return data
    }
}

/// Journal fields that show other fields' entries.
enum JournalStreams {
    /// `comments_and_work_notes`: the entries of `comments` and `work_notes` together.
    static let combined = "comments_and_work_notes"

    /// The journal elements whose entries a journal field shows.
    static func elements(of field: String) -> [String] {
        field == combined ? ["comments", "work_notes"] : [field]
    }
}
