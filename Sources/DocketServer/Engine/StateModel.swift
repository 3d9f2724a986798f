import DocketModel
import Foundation

/// What an action does to a record (the kinds of Compass's record-type actions).
enum WorkflowActionKind: String, Sendable, CaseIterable {
    /// Creates the record; its destination is the initial state.
    case submit
    /// Changes fields and keeps the state.
    case modify
    /// Moves the record from one of its source states to the destination.
    case changeState = "change_state"
    /// Marks the record a duplicate of another (`duplicate_of`), remembering the state it left.
    case duplicate
    /// Reverses a duplicate, back to the state the record had before it.
    case unduplicate
    /// Deletes the record.
    case delete
}

/// How a field behaves while an action runs in a state.
enum FieldBehavior: String, Sendable, CaseIterable {
    case mandatory, optional
    case readOnly = "read_only"
}

/// One action of a state model (a `sys_wf_action` row).
struct WorkflowAction: Sendable, Equatable {
    var name: String
    var kind: WorkflowActionKind
    /// The states it may start from (stored values); empty: any state.
    var sources: [String]
    /// The state it leads to; empty for actions that keep the state (modify, delete) or restore one (unduplicate).
    var destination: String
    /// Roles allowed to run it; empty: anyone who may change the record.
    var roles: Set<String>
    var order: Int

    func starts(from state: String) -> Bool { sources.isEmpty || sources.contains(state) }
}

/// A field behaviour of a state model (a `sys_wf_field` row): in `state` (empty: any), while `action` runs
/// (empty: any), `field` is mandatory, optional or read-only.
struct FieldRule: Sendable, Equatable {
    var field: String
    var state: String
    var action: String
    var behavior: FieldBehavior
}

/// A table's states, actions and field behaviours, read from `sys_wf_state`, `sys_wf_action` and `sys_wf_field`.
/// A table whose model has actions is *governed*: its state changes only through a legal action, and every write
/// is one (a create runs the submit action, other changes the modify or the change-state action they amount
/// to). Without actions (ServiceNow's tables) the states only say which ones end a record's activity.
struct StateModel: Sendable {
    struct State: Sendable, Equatable {
        var value: String
        var active: Bool
        var order: Int
    }

    var table: String
    var states: [State]
    var actions: [WorkflowAction]
    var rules: [FieldRule]

    /// Whether records change only through actions (a create is the submit action, every change an action).
    var isGoverned: Bool { !actions.isEmpty && !governsTransitionsOnly }

    /// A model whose actions are all state changes (ServiceNow's problem): records are created and edited freely,
    /// but a change of `state` must be one of the moves its actions allow.
    var governsTransitionsOnly: Bool { !actions.isEmpty && actions.allSatisfy { $0.kind == .changeState } }

    /// States in which a record is no longer active.
    var inactiveStates: Set<String> { Set(states.filter { !$0.active }.map(\.value)) }

    /// The action with this name (case-insensitive, as Compass matches names).
    func action(named name: String) -> WorkflowAction? {
        actions.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }
    }

    func actions(of kind: WorkflowActionKind) -> [WorkflowAction] { actions.filter { $0.kind == kind } }

    /// The state a record is in once `action` has run on a record in `state`; `saved` is the record's
    /// `unduplicate_state` (for an unduplicate).
    func state(after action: WorkflowAction, from state: String, saved: String) -> String {
        switch action.kind {
        case .changeState, .submit, .duplicate: return action.destination.isEmpty ? state : action.destination
        case .unduplicate: return !saved.isEmpty ? saved : action.destination.isEmpty ? state : action.destination
        case .modify, .delete: return state
        }
    }

    /// The behaviour of `field` while `action` runs and leads to `state`: a rule naming both wins over one naming
    /// the action, which wins over one naming the state, which wins over one naming neither; nil when no rule
    /// speaks of the field.
    func behavior(of field: String, action: String, state: String) -> FieldBehavior? {
        var best: (rank: Int, behavior: FieldBehavior)?
        for rule in rules where rule.field == field {
            let actionMatches = rule.action.isEmpty || rule.action.caseInsensitiveCompare(action) == .orderedSame
            let stateMatches = rule.state.isEmpty || rule.state == state
            guard actionMatches, stateMatches else { continue }
            let rank = (rule.action.isEmpty ? 0 : 2) + (rule.state.isEmpty ? 0 : 1)
            if best == nil || rank > best!.rank { best = (rank, rule.behavior) }
        }
        return best?.behavior
    }
}

extension StateModel {
    /// Reads every table's model.
    static func load(db: SQLExecutor) async throws -> [String: StateModel] {
        var models: [String: StateModel] = [:]
        func model(_ table: String) -> StateModel {
            models[table] ?? StateModel(table: table, states: [], actions: [], rules: [])
        }
        for row in try await db.rows(
            "SELECT table_name, value, active, sequence FROM sys_wf_state"
        ) {
            let table = try row.value(at: "table_name", kind: .text).text ?? ""
            var entry = model(table)
            entry.states.append(State(
                value: try row.value(at: "value", kind: .text).text ?? "",
                active: try row.value(at: "active", kind: .integer).intValue != 0,
                order: try row.value(at: "sequence", kind: .integer).intValue ?? 0
            ))
            models[table] = entry
        }
        for row in try await db.rows(
            "SELECT table_name, name, kind, source_states, destination_state, roles, sequence"
                + " FROM sys_wf_action WHERE active = 1"
        ) {
            let table = try row.value(at: "table_name", kind: .text).text ?? ""
            guard let kind = WorkflowActionKind(rawValue: try row.value(at: "kind", kind: .text).text ?? ""),
                let name = try row.value(at: "name", kind: .text).text, !name.isEmpty
            else { continue }
            var entry = model(table)
            entry.actions.append(WorkflowAction(
                name: name, kind: kind, sources: list(try row.value(at: "source_states", kind: .text).text),
                destination: try row.value(at: "destination_state", kind: .text).text ?? "",
                roles: Set(list(try row.value(at: "roles", kind: .text).text)),
                order: try row.value(at: "sequence", kind: .integer).intValue ?? 0
            ))
            models[table] = entry
        }
        for row in try await db.rows("SELECT table_name, field, state, action, behavior FROM sys_wf_field") {
            let table = try row.value(at: "table_name", kind: .text).text ?? ""
            guard let behavior = FieldBehavior(rawValue: try row.value(at: "behavior", kind: .text).text ?? ""),
                let field = try row.value(at: "field", kind: .text).text, !field.isEmpty
            else { continue }
            var entry = model(table)
            entry.rules.append(FieldRule(
                field: field, state: try row.value(at: "state", kind: .text).text ?? "",
                action: try row.value(at: "action", kind: .text).text ?? "", behavior: behavior
            ))
            models[table] = entry
        }
        for (table, var entry) in models {
            entry.states.sort { ($0.order, $0.value) < ($1.order, $1.value) }
            entry.actions.sort { ($0.order, $0.name) < ($1.order, $1.name) }
            models[table] = entry
        }
        return models
    }

    /// A comma-separated list, trimmed, without empty entries.
    static func list(_ text: String?) -> [String] {
        (text ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}
