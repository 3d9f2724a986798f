import DocketModel
import Foundation

/// One action as a write runs it: on which model, from which state to which.
struct ActionRun: Sendable {
    var action: WorkflowAction
    var oldState: String
    var newState: String
}

extension RecordStore {
    /// The actions `caller` may run now on a record: those of its table's model that start from the record's state,
    /// that the caller's roles allow, and that the access rules let the caller do (change, or delete). Empty for
    /// tables without actions. Throws not found when the caller may not read the record.
    func legalActions(_ sysID: String, in tableName: String, caller: Caller) async throws -> [WorkflowAction] {
        let (_, record) = try await get(sysID, in: tableName, fields: ["sys_id", "state", "sys_class_name"], caller: caller)
        guard let table = catalog.table(record.table) ?? catalog.table(tableName),
            let model = catalog.stateModel(for: table), model.isGoverned
        else { return [] }
        let state = record["state"]
        let candidates = model.actions.filter {
            $0.kind != .submit && $0.starts(from: state) && (caller.isAdmin || caller.hasAnyRole($0.roles))
        }
        guard !candidates.isEmpty else { return [] }
        let (mayWrite, mayDelete) = try await permissions(sysID, in: tableName, caller: caller)
        return candidates.filter { $0.kind == .delete ? mayDelete : mayWrite }
    }

    /// Which action a write is, on a table whose model has actions (nil otherwise), checked against the record's
    /// state and the caller's roles; sets what the action itself writes (`state`, a duplicate's bookkeeping) in
    /// `values` and names those fields in `changed`.
    func workflowRun(
        on table: SchemaCatalog.Table, operation: AccessOperation, current: [String: String],
        values: inout [String: String], changed: inout Set<String>, requested: String?, caller: Caller
    ) throws -> ActionRun? {
        if let model = catalog.stateModel(for: table), model.governsTransitionsOnly, requested == nil {
            try checkTransition(on: table, model: model, operation: operation, from: current, to: values, changed: changed, caller: caller)
            return nil
        }
        guard let model = catalog.stateModel(for: table), model.isGoverned else {
            if let requested {
                throw EngineError.badRequest(
                    "Unknown action", detail: "Records of \(table.name) have no actions; \(requested) cannot run", field: "state"
                )
            }
            return nil
        }
        let oldState = operation == .create ? "" : current["state", default: ""]
        let action: WorkflowAction
        if let requested {
            guard let named = model.action(named: requested) else {
                throw EngineError.badRequest(
                    "Unknown action", detail: "\(table.label) has no action \(requested); its actions are "
                        + model.actions.map(\.name).joined(separator: ", "), field: "state"
                )
            }
            let fits: Bool
            switch operation {
            case .create: fits = named.kind == .submit
            case .delete: fits = named.kind == .delete
            default: fits = named.kind != .submit && named.kind != .delete
            }
            guard fits else {
                throw EngineError.badRequest(
                    "Wrong kind of action", detail: "\(named.name) is a \(named.kind.rawValue) action and cannot \(operation.rawValue) a record",
                    field: "state"
                )
            }
            action = named
        } else {
            switch operation {
            case .create:
                guard let submit = model.actions(of: .submit).first else {
                    throw EngineError.badRequest("Operation Failed", detail: "\(table.label) records cannot be created (no submit action)")
                }
                action = submit
            case .delete:
                guard let delete = model.actions(of: .delete).first else {
                    throw EngineError.badRequest("Operation Failed", detail: "\(table.label) records cannot be deleted (no delete action)")
                }
                action = delete
            default:
                if changed.contains("state") {
                    let target = values["state", default: ""]
                    let moves = model.actions(of: .changeState).filter { $0.starts(from: oldState) && $0.destination == target }
                    guard let move = moves.first else {
                        throw EngineError.badRequest(
                            "Operation Failed",
                            detail: "No action takes a \(table.label.lowercased()) from \(stateLabel(oldState, in: table)) to "
                                + "\(stateLabel(target, in: table)); possible here: "
                                + possible(model, from: oldState, caller: caller), field: "state"
                        )
                    }
                    action = move
                } else {
                    guard let modify = model.actions(of: .modify).first else {
                        throw EngineError.badRequest(
                            "Operation Failed", detail: "\(table.label) records change only through their actions"
                        )
                    }
                    action = modify
                }
            }
        }
        guard operation == .create || action.starts(from: oldState) else {
            throw EngineError.badRequest(
                "Operation Failed",
                detail: "\(action.name) cannot run on a \(table.label.lowercased()) in state \(stateLabel(oldState, in: table)); "
                    + "possible here: " + possible(model, from: oldState, caller: caller), field: "state"
            )
        }
        guard caller.isAdmin || caller.hasAnyRole(action.roles) else {
            var error = EngineError.forbidden(operation == .delete ? .delete : operation, table: table.name)
            error.field = "state"
            throw error
        }
        let newState = model.state(after: action, from: oldState, saved: current["unduplicate_state", default: ""])
        // The state follows the action; a state given with it must be the one the action leads to.
        if changed.contains("state"), values["state", default: ""] != newState {
            throw EngineError.badRequest(
                "Operation Failed",
                detail: "\(action.name) leads to \(stateLabel(newState, in: table)), not \(stateLabel(values["state", default: ""], in: table))",
                field: "state"
            )
        }
        func set(_ field: String, _ value: String) {
            guard table.field(field) != nil, values[field, default: ""] != value else { return }
            values[field] = value
            changed.insert(field)
        }
        if operation != .delete { set("state", newState) }
        switch action.kind {
        case .duplicate:
            set("unduplicate_state", oldState)
            if values["duplicate_of", default: ""] == current["sys_id"] {
                throw EngineError.badRequest("Operation Failed", detail: "A record cannot duplicate itself", field: "duplicate_of")
            }
        case .unduplicate:
            set("unduplicate_state", "")
            set("duplicate_of", "")
        default: break
        }
        return ActionRun(action: action, oldState: oldState, newState: newState)
    }

    /// Mandatory and read-only fields: where a model has actions, every field's behaviour for the action and the
    /// state it leads to (a field no rule names follows its dictionary entry); elsewhere the dictionary's mandatory
    /// fields, of a new record or as changed. Throws one error naming every field that fails.
    func checkFields(
        of table: SchemaCatalog.Table, run: ActionRun?, values: [String: String], written: Set<String>, isInsert: Bool
    ) throws {
        let model = run == nil ? nil : catalog.stateModel(for: table)
        var missing: [FieldDefinition] = []
        var readOnly: [FieldDefinition] = []
        for field in table.fields where field.type.isStored && !SystemFields.names.contains(field.name) {
            let behavior: FieldBehavior
            if let model, let run {
                if field.name == "state" { continue }
                behavior = Self.behavior(of: field, model: model, action: run.action.name, state: run.newState)
            } else {
                guard field.mandatory, isInsert || written.contains(field.name) else { continue }
                behavior = .mandatory
            }
            switch behavior {
            case .mandatory where values[field.name, default: ""].isEmpty: missing.append(field)
            case .readOnly where written.contains(field.name): readOnly.append(field)
            default: break
            }
        }
        guard !missing.isEmpty || !readOnly.isEmpty else { return }
        var parts: [String] = []
        func names(_ fields: [FieldDefinition]) -> String { fields.map(\.label).joined(separator: ", ") }
        if !missing.isEmpty { parts.append("mandatory fields are empty: " + names(missing)) }
        if !readOnly.isEmpty { parts.append("read-only fields cannot be changed: " + names(readOnly)) }
        var detail = parts.joined(separator: "; ")
        detail = detail.prefix(1).uppercased() + detail.dropFirst()
        if let run { detail += " (\(run.action.name))" }
        var error = EngineError.badRequest("Operation Failed", detail: detail, field: (missing + readOnly).first?.name)
        error.table = table.name
        error.fields = missing.map(\.name) + readOnly.map(\.name)
        error.validation = .init(missing: missing.map(\.name), readOnly: readOnly.map(\.name), action: run?.action.name)
        throw error
    }

    /// How a field behaves while `action` runs and leads to `state`: the model's rule, else the dictionary's entry.
    static func behavior(of field: FieldDefinition, model: StateModel?, action: String, state: String) -> FieldBehavior {
        if field.name == "state", model?.isGoverned == true { return .readOnly }
        return model?.behavior(of: field.name, action: action, state: state)
            ?? (field.readOnly ? .readOnly : field.mandatory ? .mandatory : .optional)
    }

    /// Writes the history entry of an action, in the action's transaction, and appends it to the log.
    /// `time` is when the action ran: now, or what an import gave as the record's update time.
    func recordHistory(
        _ run: ActionRun, of change: ChangeEvent, table: SchemaCatalog.Table, caller: Caller, time: String, now: String,
        db: SQLExecutor
    ) async throws -> ChangeEvent? {
        let sysID = change.sysID
        guard let history = catalog.table("sys_wf_history") else { return nil }
        let id = SysID.generate()
        var values: [String: String] = [
            "table_name": table.name, "document": sysID, "action_name": run.action.name,
            "action_type": run.action.kind.rawValue, "user_name": caller.userName, "action_timestamp": time,
            "old_state": run.oldState, "new_state": run.newState, "sys_id": id, "sys_created_on": time,
            "sys_created_by": caller.userName, "sys_updated_on": time, "sys_updated_by": caller.userName,
            "sys_mod_count": "0", "sequence": String(change.sequence),
        ]
        if caller.userID != Caller.system.userID { values["user"] = caller.userID }
        let stored = history.fields.filter { $0.type.isStored && !values[$0.name, default: ""].isEmpty }
        try await db.run(
            "INSERT INTO " + .identifier(history.physicalTable) + " ("
                + stored.map { SQLFragment.identifier($0.name) }.joined(", ") + ") VALUES ("
                + stored.map { FieldCoercion.sqlValue(values[$0.name]!, for: $0).fragment }.joined(", ") + ")"
        )
        return try await appendEvent(
            table: history, sysID: id, operation: .insert, fields: stored.map(\.name),
            values: values.filter { history.field($0.key) != nil }, previous: [:], caller: caller, now: now, db: db
        )
    }

    /// On a table whose model allows only some moves between states: a change of `state` must be one of them (for
    /// the caller's roles). Creates and changes that keep the state are free.
    private func checkTransition(
        on table: SchemaCatalog.Table, model: StateModel, operation: AccessOperation, from current: [String: String],
        to values: [String: String], changed: Set<String>, caller: Caller
    ) throws {
        guard operation == .write, changed.contains("state") else { return }
        let old = current["state", default: ""]
        let new = values["state", default: ""]
        guard old != new, !old.isEmpty else { return }
        let allowed = model.actions.contains {
            $0.starts(from: old) && $0.destination == new && (caller.isAdmin || caller.hasAnyRole($0.roles))
        }
        guard !allowed else { return }
        let next = model.actions.filter { $0.starts(from: old) && (caller.isAdmin || caller.hasAnyRole($0.roles)) }
            .map { "\(stateLabel($0.destination, in: table)) (\($0.destination))" }
        throw EngineError.badRequest(
            "Operation Failed",
            detail: "\(table.label) state transition from state \(old) to \(new) is not possible; from \(stateLabel(old, in: table)) "
                + "it may move to " + (next.isEmpty ? "no other state" : next.joined(separator: ", ")),
            field: "state"
        )
    }

    private func stateLabel(_ value: String, in table: SchemaCatalog.Table) -> String {
        value.isEmpty ? "(none)" : catalog.choiceLabel(value, field: "state", in: table) ?? value
    }

    private func possible(_ model: StateModel, from state: String, caller: Caller) -> String {
        let names = model.actions.filter {
            $0.kind != .submit && $0.starts(from: state) && (caller.isAdmin || caller.hasAnyRole($0.roles))
        }.map(\.name)
        return names.isEmpty ? "none" : names.joined(separator: ", ")
    }
}
