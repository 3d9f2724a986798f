import DocketModel
import Foundation

/// ``WorkBackend`` over ServiceNow's Table API (docketd or a real instance): items are tasks (`task` and the tables
/// extending it) found by number; states come from the table's `sys_choice` list, and a transition sets the state
/// (ServiceNow tables are permissive: any state may follow any other). Notifications need docketd's event stream.
///
/// Values are written as a person reads them (`sysparm_input_display_value=true`): `state=Resolved`,
/// `urgency=1 - High`, `assigned_to=Beth Anglin`; docketd also takes a user name (`assigned_to=beth.anglin`), and
/// refuses a reference that names no record, or several, naming the candidates.
public struct ServiceNowBackend: WorkBackend {
    let client: DocketClient

    public init(client: DocketClient) { self.client = client }

    static let me = "javascript:gs.getUserID()"

    public func myItems(type: String?) async throws -> [WorkItem] {
        try await list(type ?? "task", "assigned_to=\(Self.me)^active=true^ORDERBYDESCsys_updated_on")
    }

    public func reportedByMe(type: String?) async throws -> [WorkItem] {
        let table = type ?? "task"
        let reporter = table == "incident" ? "caller_id=\(Self.me)^ORopened_by=\(Self.me)" : "opened_by=\(Self.me)"
        return try await list(table, reporter + "^ORDERBYDESCsys_updated_on")
    }

    public func item(_ id: String) async throws -> WorkItem {
        let (table, sysID) = try await locate(id)
        return Self.item(try await client.table.record(sysID, in: table, displayValue: .all), table: table)
    }

    public func comment(on id: String, _ text: String) async throws {
        let (table, sysID) = try await locate(id)
        _ = try await client.table.updateRecord(sysID, in: table, with: ["comments": text])
    }

    /// Creates a record of `type`; with no fields at all it is refused, naming the fields a new record needs
    /// (`short_description` and the table's mandatory fields).
    public func create(type: String, fields: [(String, String)]) async throws -> WorkItem {
        if fields.isEmpty {
            let required = try await requiredFields(table: type)
            throw DocketError(
                kind: .invalidRequest,
                message: "A new \(type) needs its fields as field=value; required: " + required.joined(separator: ", ")
                    + " (for example: short_description='Printer jams on every page' urgency='2 - Medium')"
            )
        }
        try await checkFields(fields.map(\.0), in: type)
        let created = try await client.table.createRecord(with: Self.values(fields), in: type, inputDisplayValue: true)
        return Self.item(try await client.table.record(created.sysID, in: type, displayValue: .all), table: type)
    }

    public func edit(_ id: String, fields: [(String, String)]) async throws -> WorkItem {
        let (table, sysID) = try await locate(id)
        try await checkFields(fields.map(\.0), in: table)
        _ = try await client.table.updateRecord(sysID, in: table, with: Self.values(fields), inputDisplayValue: true)
        return Self.item(try await client.table.record(sysID, in: table, displayValue: .all), table: table)
    }

    /// The fields a new record of a table must be given: `short_description` where the table has one, and the
    /// dictionary's mandatory fields of the table and the tables it extends.
    func requiredFields(table: String) async throws -> [String] {
        let dictionary = try await dictionaryRows(of: table, fields: ["element", "mandatory"])
        var required = dictionary.contains { $0["element"] == "short_description" } ? ["short_description"] : []
        for entry in dictionary where entry["mandatory"] == "true" {
            if let name = entry["element"], !name.isEmpty, !name.hasPrefix("sys_"), !required.contains(name) { required.append(name) }
        }
        return required.isEmpty ? ["(none)"] : required
    }

    /// The active `sys_dictionary` rows of `table` and of the tables it extends, with `fields`.
    func dictionaryRows(of table: String, fields: [String]) async throws -> [TableRecord] {
        let chain = try await chain(of: table)
        return try await client.table.records(
            in: "sys_dictionary", query: try EncodedQuery("nameIN\(chain.joined(separator: ","))^active=true"),
            fields: fields, limit: 5_000
        ).records
    }

    /// `table`, then the tables it extends (at most 8 in all).
    func chain(of table: String) async throws -> [String] {
        var chain = [table]
        while chain.count < 8, let parent = try await parent(of: chain[chain.count - 1]) { chain.append(parent) }
        return chain
    }

    /// The table a table extends, or nil.
    private func parent(of table: String) async throws -> String? {
        let parentID = try await client.table.records(
            in: "sys_db_object", query: .where("name", .equals, table), fields: ["super_class"], limit: 1
        ).records.first?["super_class"] ?? ""
        guard !parentID.isEmpty else { return nil }
        let name = try await client.table.record(parentID, in: "sys_db_object", fields: ["name"])["name"] ?? ""
        return name.isEmpty ? nil : name
    }

    /// Every other state of the table's state choice list.
    public func actions(for id: String) async throws -> [WorkAction] {
        let (table, sysID) = try await locate(id)
        let current = try await client.table.record(sysID, in: table, fields: ["state"])["state"] ?? ""
        return try await choices(table: table, field: "state").filter { $0.value != current }.map {
            WorkAction(name: $0.label, destination: $0.label)
        }
    }

    /// Moves the item to the state named by `action` (a label such as `Resolved`, or a value such as `6`).
    public func transition(_ id: String, action: String, fields: [(String, String)]) async throws -> WorkItem {
        let (table, sysID) = try await locate(id)
        let states = try await choices(table: table, field: "state")
        guard let state = states.first(where: {
            $0.label.caseInsensitiveCompare(action) == .orderedSame || $0.value == action
        }) else {
            throw DocketError(
                kind: .invalidRequest,
                message: "\(id) has no state '\(action)'; its states are: " + states.map(\.label).joined(separator: ", ")
            )
        }
        if !fields.isEmpty { try await checkFields(fields.map(\.0), in: table) }
        var values = Self.values(fields)
        values["state"] = state.value
        _ = try await client.table.updateRecord(sysID, in: table, with: values, inputDisplayValue: true)
        return Self.item(try await client.table.record(sysID, in: table, displayValue: .all), table: table)
    }

    public func delete(_ id: String) async throws {
        let (table, sysID) = try await locate(id)
        try await client.table.deleteRecord(sysID, in: table)
    }

    public func choices(for id: String, field: String) async throws -> [WorkChoice] {
        let (table, _) = try await locate(id)
        return try await choices(table: table, field: field)
    }

    public func watchMine() -> AsyncThrowingStream<WorkNotification, any Error> {
        let client = client
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    let maker = NotificationMaker(myUserName: client.session.credentials.userName)
                    let backend = ServiceNowBackend(client: client)
                    // Choice labels per table and field, read once. A lookup that fails shows the value this time and
                    // is tried again for the next change, rather than being remembered as "no labels".
                    var labels: [String: [String: String]] = [:]
                    func label(_ value: String, _ field: String, in table: String) async -> String {
                        let key = table + "." + field
                        if labels[key] == nil {
                            guard let list = try? await backend.choices(table: table, field: field) else { return value }
                            labels[key] = Dictionary(list.map { ($0.value, $0.label) }, uniquingKeysWith: { a, _ in a })
                        }
                        return labels[key]?[value] ?? value
                    }
                    for try await change in client.liveUpdates(table: "task", query: "assigned_to=\(Self.me)") {
                        var states: WorkNotification.StateChange? = nil
                        var changes: [WorkNotification.FieldChange] = []
                        if change.kind == .changed {
                            for field in change.fields where !field.hasPrefix("sys_") {
                                if Self.journalFields.contains(field) {
                                    changes.append(.init(field: field, from: nil, to: change[field]))
                                    continue
                                }
                                let old = await label(change.previous[field] ?? "", field, in: change.table)
                                let new = await label(change[field], field, in: change.table)
                                if field == "state" {
                                    states = .init(from: old, to: new)
                                } else if !Self.derivedFields.contains(field) {
                                    changes.append(.init(field: field, from: old, to: new))
                                }
                            }
                        }
                        let id = change["number"].isEmpty ? change.sysID : change["number"]
                        if let note = maker.notification(
                            for: change, id: id, title: change["short_description"], states: states, changes: changes
                        ) {
                            continuation.yield(note)
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    // MARK: Helpers

    /// Fields whose change adds a journal entry: their value is the new entry.
    static let journalFields: Set<String> = ["comments", "work_notes"]
    /// Fields that follow from others (the change that set them is described already).
    static let derivedFields: Set<String> = ["active", "incident_state", "reassignment_count", "priority_calculated"]

    private func list(_ table: String, _ query: String) async throws -> [WorkItem] {
        let page = try await client.table.records(in: table, query: try EncodedQuery(query), limit: 500, displayValue: .all)
        return page.records.map { Self.item($0, table: table) }
    }

    /// The table and sys_id of an item given by number (or by sys_id).
    func locate(_ id: String) async throws -> (table: String, sysID: String) {
        let isSysID = id.count == 32 && id.allSatisfy(\.isHexDigit)
        let page = try await client.table.records(
            in: "task", query: .where(isSysID ? "sys_id" : "number", .equals, id), fields: ["sys_id", "sys_class_name"],
            limit: 1
        )
        guard let found = page.records.first else {
            throw DocketError(kind: .http, status: 404, message: "No item \(id)")
        }
        return (found["sys_class_name"].flatMap { $0.isEmpty ? nil : $0 } ?? "task", found.sysID)
    }

    /// A field's choices in a table, or in the tables it extends.
    func choices(table: String, field: String) async throws -> [WorkChoice] {
        let page = try await client.table.records(
            in: "sys_choice",
            query: try EncodedQuery("name=\(table)^element=\(field)^inactive=false^ORDERBYsequence"),
            fields: ["value", "label"], limit: 500
        )
        if page.records.isEmpty, table != "task" {
            let parentID = try await client.table.records(
                in: "sys_db_object", query: .where("name", .equals, table), fields: ["super_class"], limit: 1
            ).records.first?["super_class"] ?? ""
            let parent = parentID.isEmpty
                ? "" : try await client.table.record(parentID, in: "sys_db_object", fields: ["name"])["name"] ?? ""
            if !parent.isEmpty { return try await choices(table: parent, field: field) }
        }
        return page.records.map { WorkChoice(value: $0["value"] ?? "", label: $0["label"] ?? "") }
    }

    /// Every choice list of a table, by field, in order: the table's own lists and those of the tables it extends
    /// (a list the table defines itself wins), read in one request after the table chain.
    public func choiceLists(table: String) async throws -> [String: [WorkChoice]] {
        let chain = try await chain(of: table)
        let rows = try await client.table.records(
            in: "sys_choice",
            query: try EncodedQuery("nameIN\(chain.joined(separator: ","))^inactive=false^ORDERBYsequence"),
            fields: ["name", "element", "value", "label"], limit: 5_000
        ).records
        var lists: [String: (depth: Int, choices: [WorkChoice])] = [:]
        for row in rows {
            guard let element = row["element"], !element.isEmpty, let depth = chain.firstIndex(of: row["name"] ?? "") else { continue }
            let choice = WorkChoice(value: row["value"] ?? "", label: row["label"] ?? "")
            switch lists[element] {
            case .some(let list) where list.depth == depth: lists[element]?.choices.append(choice)
            case .some(let list) where list.depth < depth: continue
            default: lists[element] = (depth, [choice])
            }
        }
        return lists.mapValues(\.choices)
    }

    static func values(_ fields: [(String, String)]) -> [String: String] {
        Dictionary(fields, uniquingKeysWith: { _, last in last })
    }

    static func item(_ record: TableRecord, table: String) -> WorkItem {
        var fields: [String: String] = [:]
        for name in record.fieldNames { fields[name] = record.displayValue(name) ?? "" }
        let type = record["sys_class_name"].flatMap { $0.isEmpty ? nil : $0 } ?? table
        return WorkItem(
            id: record["number"] ?? record.sysID, type: type, title: fields["short_description"] ?? "",
            state: fields["state"] ?? "", assignee: fields["assigned_to"] ?? "",
            reporter: (fields["caller_id"] ?? "").isEmpty ? fields["opened_by"] ?? "" : fields["caller_id"] ?? "", fields: fields
        )
    }
}
