import Foundation

/// One work item, whatever the backend: a ServiceNow task (incident, problem…) or a Compass record (a defect).
public struct WorkItem: Sendable, Equatable {
    /// The display id: `INC0010001`, `SAMPL00000001`.
    public var id: String
    /// The record type or table: `incident`, `Defect`.
    public var type: String
    /// The one-line summary (`short_description`, `Headline`).
    public var title: String
    /// The state's label (`In Progress`, `Opened`).
    public var state: String
    /// Who it is assigned to (a user name or display name; "" when nobody).
    public var assignee: String
    /// Who reported it.
    public var reporter: String
    /// Every field's display value, by the backend's own field names.
    public var fields: [String: String]
    /// The actions the caller may run on it now (Compass's legal actions; for ServiceNow tables, nil: see
    /// ``WorkBackend/actions(for:)``).
    public var legalActions: [String]?

    public init(
        id: String, type: String, title: String, state: String, assignee: String = "", reporter: String = "",
        fields: [String: String] = [:], legalActions: [String]? = nil
    ) {
        self.id = id
        self.type = type
        self.title = title
        self.state = state
        self.assignee = assignee
        self.reporter = reporter
        self.fields = fields
        self.legalActions = legalActions
    }
}

/// A way to move an item on: a Compass action (`Resolve`), or for ServiceNow tables a state to set.
public struct WorkAction: Sendable, Equatable {
    /// What to pass to ``WorkBackend/transition(_:action:fields:)``.
    public var name: String
    /// The state it leads to ("" when it keeps the state).
    public var destination: String

    public init(name: String, destination: String) {
        self.name = name
        self.destination = destination
    }
}

/// A value a field may take: the stored value and its label (the same for Compass).
public struct WorkChoice: Sendable, Equatable {
    public var value: String
    public var label: String

    public init(value: String, label: String) {
        self.value = value
        self.label = label
    }
}

/// Something that happened to one of my items, as it happened.
public struct WorkNotification: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// It was assigned to me (or created for me).
        case assigned
        /// It changed, and is still mine.
        case modified
        /// It was assigned to someone else.
        case unassigned
        /// It was deleted.
        case deleted
    }

    /// A state before and after.
    public struct StateChange: Sendable, Equatable {
        public var from: String
        public var to: String

        public init(from: String, to: String) {
            self.from = from
            self.to = to
        }
    }

    /// Another field before and after (a value not known is empty).
    public struct FieldChange: Sendable, Equatable {
        /// The field's name as the backend shows it (`Priority`, `short_description`).
        public var field: String
        public var from: String?
        public var to: String?

        public init(field: String, from: String?, to: String?) {
            self.field = field
            self.from = from
            self.to = to
        }

        /// "Priority: 2 → 1", "Description changed", "comments: 'On my way'".
        public var description: String {
            switch (from, to) {
            case (let from?, let to?): return "\(field): \(Self.short(from)) → \(Self.short(to))"
            case (nil, let to?): return "\(field): \(Self.short(to))"
            default: return "\(field) changed"
            }
        }

        static func short(_ value: String) -> String {
            let line = value.split(separator: "\n", omittingEmptySubsequences: true).first.map(String.init) ?? ""
            if line.isEmpty { return "''" }
            return line.count > 40 || line.count < value.trimmingCharacters(in: .whitespacesAndNewlines).count
                ? "'" + String(line.prefix(39)) + "…'" : "'" + line + "'"
        }
    }

    public var kind: Kind
    /// The item's display id.
    public var id: String
    /// Who did it (user name).
    public var user: String
    /// The state before and after, for a change of state.
    public var stateChange: StateChange?
    /// The other fields the change set, in the order they were written.
    public var changes: [FieldChange] = []
    /// The item's summary, when known.
    public var title: String
    /// The event log's sequence number (resume after it).
    public var sequence: Int

    /// A sentence: "SAMPL00000042 assigned to you by beth.anglin", "SAMPL00000042 modified by beth.anglin
    /// (State: Opened → Resolved; Priority: '2-Major' → '1-Critical'; Description changed)".
    public var message: String {
        switch kind {
        case .assigned: return "\(id) assigned to you by \(user)"
        case .modified:
            let parts = (stateChange.map { ["State: \($0.from) → \($0.to)"] } ?? []) + changes.map(\.description)
            return "\(id) modified by \(user)" + (parts.isEmpty ? "" : " (" + parts.joined(separator: "; ") + ")")
        case .unassigned: return "\(id) assigned away from you by \(user)"
        case .deleted: return "\(id) deleted by \(user)"
        }
    }
}

/// The work of one user in one tracker, whichever API it speaks: the CLI and apps use this and do not care whether
/// they talk to ServiceNow tables (``ServiceNowBackend``) or to Compass (``CompassBackend``).
///
/// Field names and values are the backend's own (`short_description` and `urgency=1` for ServiceNow; `Headline` and
/// `Severity=2-Major` for Compass). A commit that leaves a mandatory field empty fails with one ``DocketError``
/// naming every such field, and changes nothing.
///
/// ```swift
/// let backend = client.workBackend()
/// for item in try await backend.myItems(type: nil) { print(item.id, item.state, item.title) }
/// ```
public protocol WorkBackend: Sendable {
    /// Items assigned to me (of a type, or of every type), newest first.
    func myItems(type: String?) async throws -> [WorkItem]
    /// Items I reported.
    func reportedByMe(type: String?) async throws -> [WorkItem]
    /// One item by display id.
    func item(_ id: String) async throws -> WorkItem
    /// Adds a comment (a ServiceNow additional comment, a Compass note).
    func comment(on id: String, _ text: String) async throws
    /// Creates an item of a type with field values.
    func create(type: String, fields: [(String, String)]) async throws -> WorkItem
    /// Changes fields, keeping the state.
    func edit(_ id: String, fields: [(String, String)]) async throws -> WorkItem
    /// The ways the item may move on now.
    func actions(for id: String) async throws -> [WorkAction]
    /// Runs an action (or, for ServiceNow tables, moves to a state) with field values.
    func transition(_ id: String, action: String, fields: [(String, String)]) async throws -> WorkItem
    /// Deletes an item.
    func delete(_ id: String) async throws
    /// The values a field of an item may take.
    func choices(for id: String, field: String) async throws -> [WorkChoice]
    /// Notifications about my items as they happen (from docketd's event log), until cancelled.
    func watchMine() -> AsyncThrowingStream<WorkNotification, any Error>
}

extension DocketClient {
    /// The backend for this client's login: Compass for a Compass login, ETO for an ETO login, else the ServiceNow
    /// Table API.
    public func workBackend() -> any WorkBackend {
        if case .eto = session.credentials { return ETOBackend(client: self) }
        return session.credentials.compassDatabase != nil ? CompassBackend(client: self) : ServiceNowBackend(client: self)
    }
}

/// Turns live changes to my items into notifications (shared by the backends).
struct NotificationMaker {
    let myUserName: String

    /// The notification for a change made by someone else; nil for my own changes. `states` gives the state's
    /// label before and after (when the change moved it).
    func notification(
        for change: RecordChange, id: String, title: String, states: WorkNotification.StateChange?,
        changes: [WorkNotification.FieldChange] = []
    ) -> WorkNotification? {
        guard change.user != myUserName else { return nil }
        let kind: WorkNotification.Kind
        switch change.kind {
        case .entered: kind = .assigned
        case .changed: kind = .modified
        case .left: kind = change.operation == "delete" ? .deleted : .unassigned
        case .deleted: kind = .deleted
        }
        return WorkNotification(
            kind: kind, id: id, user: change.user, stateChange: kind == .modified ? states : nil,
            changes: kind == .modified ? changes : [], title: title, sequence: change.sequence
        )
    }
}
