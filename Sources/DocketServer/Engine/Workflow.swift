import DocketModel

/// The business rules that run on every write, before the row is stored.
enum Workflow {
    /// (impact, urgency) → priority, the base system's lookup.
    static func priority(impact: Int, urgency: Int) -> Int {
        let matrix = [[1, 2, 3], [2, 3, 4], [3, 4, 5]]
        guard (1...3).contains(impact), (1...3).contains(urgency) else { return 4 }
        return matrix[impact - 1][urgency - 1]
    }

    /// Applies the rules to `values` (the record after the change); returns the fields it changed itself.
    /// `changed` names the fields the caller changed; `isInsert` tells a new record. `model` is the table's state
    /// model: its inactive states end a record's activity; where it has actions, priority is the users' to set
    /// (ServiceNow's impact × urgency lookup is for ServiceNow's tables).
    static func apply(
        to values: inout [String: String], changed: Set<String>, isInsert: Bool, table: SchemaCatalog.Table,
        model: StateModel?, caller: Caller, now: String
    ) -> Set<String> {
        var touched = Set<String>()
        func set(_ field: String, _ value: String) {
            guard table.field(field) != nil, values[field, default: ""] != value else { return }
            values[field] = value
            touched.insert(field)
        }
        if table.ancestry.contains("task") {
            if isInsert, !changed.contains("state"), let initial = BaseSchema.initialStates[table.ancestry.first { BaseSchema.initialStates[$0] != nil } ?? ""] {
                set("state", initial)
            }
            // An incident's priority always follows impact and urgency; on other tasks (changes, problem and catalog
            // tasks) a priority the write sets itself is kept, as automation sets it there.
            let keepsGiven = !table.ancestry.contains("incident") && changed.contains("priority")
            if model?.isGoverned != true, !keepsGiven, isInsert || changed.contains("impact") || changed.contains("urgency") {
                let impact = Int(values["impact", default: "3"]) ?? 3
                let urgency = Int(values["urgency", default: "3"]) ?? 3
                set("priority", String(priority(impact: impact, urgency: urgency)))
            }
            if isInsert || changed.contains("state") {
                let state = values["state", default: ""]
                let inactive = model?.inactiveStates.contains(state) ?? false
                set("active", inactive ? "false" : "true")
                if inactive, values["closed_at", default: ""].isEmpty {
                    set("closed_at", now)
                    set("closed_by", caller.userID)
                }
                if table.ancestry.contains("incident") {
                    set("incident_state", state)
                    if state == "6", values["resolved_at", default: ""].isEmpty {
                        set("resolved_at", now)
                        set("resolved_by", caller.userID)
                    }
                }
            }
            if !isInsert, changed.contains("assigned_to") || changed.contains("assignment_group") {
                // A stored count may be any integer (an admin can write it): saturate rather than overflow.
                let count = Int(values["reassignment_count", default: "0"]) ?? 0
                set("reassignment_count", String(count == .max ? count : count + 1))
            }
        }
        if table.name == "sys_user", changed.contains("first_name") || changed.contains("last_name"),
            !changed.contains("name")
        {
            let full = [values["first_name", default: ""], values["last_name", default: ""]]
                .filter { !$0.isEmpty }.joined(separator: " ")
            set("name", full)
        }
        if table.name == "kb_knowledge", changed.contains("workflow_state"),
            values["workflow_state"] == "published", values["published", default: ""].isEmpty
        {
            set("published", now)
        }
        return touched
    }
}
