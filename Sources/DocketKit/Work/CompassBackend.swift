import DocketModel
import Foundation

/// ``WorkBackend`` over the Compass REST API: lists come from saved queries in the user's "Personal Queries" folder
/// (created on first use, as the stock app does), edits and transitions run the record type's actions through
/// Edit → Commit (and Revert when a commit fails, so nothing stays locked). Notifications follow docketd's event log
/// with the same Compass token; a Compass server without it answers the stream with an error.
public struct CompassBackend: WorkBackend {
    let client: DocketClient
    /// The record type used when none is given.
    public var defaultType: String

    public init(client: DocketClient, defaultType: String = "Defect") {
        self.client = client
        self.defaultType = defaultType
    }

    private var compass: CompassService { client.compass }

    /// The columns of the saved queries behind ``myItems(type:)`` and ``reportedByMe(type:)``.
    static let columns = ["id", "Headline", "State", "Owner", "Submitter", "Severity", "Priority", "Submit_Date"]

    public func myItems(type: String?) async throws -> [WorkItem] {
        try await list(type ?? defaultType, name: "Docket: assigned to me", field: "Owner")
    }

    public func reportedByMe(type: String?) async throws -> [WorkItem] {
        try await list(type ?? defaultType, name: "Docket: reported by me", field: "Submitter")
    }

    public func item(_ id: String) async throws -> WorkItem {
        Self.item(try await compass.record(id, type: defaultType), type: defaultType)
    }

    public func comment(on id: String, _ text: String) async throws {
        _ = try await compass.run("Modify", on: id, type: defaultType, fields: [("Note_Entry", text)])
    }

    public func create(type: String, fields: [(String, String)]) async throws -> WorkItem {
        Self.item(try await compass.createRecord(type: type, fields: fields), type: type)
    }

    public func edit(_ id: String, fields: [(String, String)]) async throws -> WorkItem {
        Self.item(try await compass.run("Modify", on: id, type: defaultType, fields: fields), type: defaultType)
    }

    /// The legal actions that are not Submit, Modify or Delete (those have their own calls), with where they lead.
    public func actions(for id: String) async throws -> [WorkAction] {
        async let record = compass.record(id, type: defaultType)
        async let recordType = compass.recordType(defaultType)
        let (current, definition) = try await (record, recordType)
        let legal = Set((current.legalActions ?? []).map { $0.actionName.lowercased() })
        return definition.actions.filter {
            legal.contains($0.name.lowercased()) && !["_SUBMIT", "_MODIFY", "_DELETE", "_BASE"].contains($0.actionType)
        }.map { WorkAction(name: $0.name, destination: $0.actionDestStateName) }
    }

    public func transition(_ id: String, action: String, fields: [(String, String)]) async throws -> WorkItem {
        let record = try await compass.record(id, type: defaultType)
        let legal = (record.legalActions ?? []).map(\.actionName)
        guard let name = legal.first(where: { $0.caseInsensitiveCompare(action) == .orderedSame }) else {
            throw DocketError(
                kind: .invalidRequest,
                message: "'\(action)' is not possible for \(id) in state \(record["State"]); possible: "
                    + legal.joined(separator: ", ")
            )
        }
        return Self.item(try await compass.run(name, on: id, type: defaultType, fields: fields), type: defaultType)
    }

    public func delete(_ id: String) async throws {
        try await compass.deleteRecord(id, type: defaultType)
    }

    public func choices(for id: String, field: String) async throws -> [WorkChoice] {
        (try await compass.field(field, of: id, type: defaultType).fieldChoiceList ?? []).map {
            WorkChoice(value: $0, label: $0)
        }
    }

    public func watchMine() -> AsyncThrowingStream<WorkNotification, any Error> {
        let backend = self
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    try await backend.follow { continuation.yield($0) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Follows changes to my records of the default type. Each change by someone else is read back through the
    /// Compass API for its State's label; the state before comes from what was last seen of the record.
    private func follow(_ deliver: (WorkNotification) -> Void) async throws {
        let maker = NotificationMaker(myUserName: client.session.credentials.userName)
        var lastState: [String: String] = [:]
        // What was last seen of each record, in Compass's field names and labels.
        var lastSeen: [String: [String: String]] = [:]
        for item in try await myItems(type: nil) {
            lastState[item.id] = item.state
            lastSeen[item.id] = item.fields
        }
        // docketd's table behind a Compass record type has the type's name in lower case.
        let updates = client.liveUpdates(
            table: defaultType.lowercased(), query: "assigned_to=\(ServiceNowBackend.me)"
        )
        for try await change in updates {
            let id = change["number"].isEmpty ? change.sysID : change["number"]
            var title = change["short_description"]
            var state = lastState[id]
            var now: [String: String]? = nil
            if change.kind != .deleted, change.operation != "delete",
                let record = try? await compass.record(id, type: defaultType)
            {
                state = record["State"]
                title = record["Headline"]
                now = Dictionary(record.fields.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
            }
            let before = lastState[id]
            let seen = lastSeen[id] ?? [:]
            lastState[id] = change.kind == .entered || change.kind == .changed ? state : nil
            lastSeen[id] = change.kind == .entered || change.kind == .changed ? now ?? seen : nil
            var states: WorkNotification.StateChange? = nil
            if change.fields.contains("state"), let state, let before, state != before { states = .init(from: before, to: state) }
            var changes: [WorkNotification.FieldChange] = []
            for field in change.fields where !field.hasPrefix("sys_") && field != "state" {
                guard let name = Self.fieldNames[field] else { continue }
                if field == "comments" {
                    changes.append(.init(field: "Note", from: nil, to: change[field]))
                } else {
                    changes.append(.init(field: name, from: seen[name], to: now?[name] ?? change[field]))
                }
            }
            if let note = maker.notification(for: change, id: id, title: title, states: states, changes: changes) { deliver(note) }
        }
    }

    // MARK: Helpers

    /// Compass's names of the fields docketd's event log names (those a person changes).
    static let fieldNames = [
        "short_description": "Headline", "description": "Description", "priority": "Priority", "severity": "Severity",
        "assigned_to": "Owner", "resolution": "Resolution", "keywords": "Keywords", "symptoms": "Symptoms",
        "project": "Project", "comments": "Notes_Log",
    ]

    /// Runs the named personal query (saving it first when the folder has none of that name).
    private func list(_ type: String, name: String, field: String) async throws -> [WorkItem] {
        let type = type.caseInsensitiveCompare(defaultType) == .orderedSame ? defaultType : type
        let name = "\(name) (\(type))"
        let folders = try await compass.folders()
        guard let personal = folders.first(where: { $0.name == "Personal Queries" }) else {
            throw DocketError(kind: .decoding, message: "the server has no Personal Queries folder")
        }
        let query: CompassQueryDef
        if let saved = personal.children?.first(where: { $0.name == name }) {
            query = try await compass.query(saved.dbId)
        } else {
            query = try await compass.createQuery(CompassQueryDef(
                name: name, folder: personal.dbId, recordType: type,
                columns: Self.columns.map { CompassQueryField($0, sortType: $0 == "Submit_Date" ? "SORT_DESC" : "NO_SORT") },
                filter: CompassFilterNode([CompassFieldFilter(field, "COMP_OP_EQ", ["[CURRENT_USER]"])])
            ))
        }
        let columns = query.shownColumns
        return try await compass.run(query: query.dbId ?? "").map { row in
            var fields: [String: String] = [:]
            for (column, value) in zip(columns, row.values) { fields[column] = value }
            return WorkItem(
                id: fields["id"] ?? row.displayName ?? "", type: type, title: fields["Headline"] ?? "",
                state: fields["State"] ?? "", assignee: fields["Owner"] ?? "", reporter: fields["Submitter"] ?? "",
                fields: fields
            )
        }
    }

    static func item(_ record: CompassRecord, type: String) -> WorkItem {
        var fields: [String: String] = [:]
        for field in record.fields { fields[field.name] = field.value }
        return WorkItem(
            id: record.id, type: record.entityDefName ?? type, title: record["Headline"], state: record["State"],
            assignee: record["Owner"], reporter: record["Submitter"], fields: fields,
            legalActions: record.legalActions?.map(\.actionName)
        )
    }
}
