import DocketModel

/// The workflow part of the base schema: the tables that hold state models and action history, the `defect`
/// record type (Compass's Defect, as a task) with its `project`, and the state models a new instance starts with.
/// Like the rest of ``BaseSchema`` these are written into the catalog tables once; from then on they are data.
enum WorkflowSchema {
    typealias S = BaseSchema

    static let tables: [TableDefinition] = [
        // A state model's states: which values a record's `state` takes and which of them end its activity.
        S.table("sys_wf_state", "Workflow State", display: "value", [
            S.string("table_name", "Table", 80), S.string("value", "Value", 40), S.bool("active", "Active", "true"),
            S.int("sequence", "Sequence", "0"),
        ], indexes: [["table_name"]]),
        // Its actions: kind, the states they start from (comma-separated values, empty: any), where they lead,
        // and the roles that may run them (comma-separated, empty: whoever may change the record).
        S.table("sys_wf_action", "Workflow Action", display: "name", [
            S.string("table_name", "Table", 80), S.string("name", "Name", 80), S.string("kind", "Kind", 40),
            S.string("source_states", "Source states", 1000), S.string("destination_state", "Destination state", 40),
            S.string("roles", "Roles", 1000), S.int("sequence", "Sequence", "0"), S.bool("active", "Active", "true"),
        ], indexes: [["table_name"]]),
        // Field behaviour per state and per action: mandatory, optional or read_only.
        S.table("sys_wf_field", "Workflow Field Behavior", display: "field", [
            S.string("table_name", "Table", 80), S.string("field", "Field", 80), S.string("state", "State", 40),
            S.string("action", "Action", 80), S.string("behavior", "Behavior", 40),
        ], indexes: [["table_name"]]),
        // One row per action run on a record: what, by whom, when, from which state to which; `sequence` is the
        // event log's sequence of the record's change (an order finer than the time's seconds).
        S.table("sys_wf_history", "Workflow History", display: "action_name", [
            S.string("table_name", "Table", 80), S.string("document", "Document", 32),
            S.string("action_name", "Action", 80), S.string("action_type", "Action type", 40),
            S.ref("user", "User", "sys_user"), S.string("user_name", "User name", 40),
            S.glideDateTime("action_timestamp", "Time"), S.string("old_state", "Old state", 40),
            S.string("new_state", "New state", 40), S.int("sequence", "Event sequence"),
        ], indexes: [["document"], ["action_timestamp"]]),
        S.table("project", "Project", display: "name", [
            S.string("name", "Name", 100), S.string("description", "Description", 4000),
            S.bool("active", "Active", "true"),
        ]),
        TableDefinition(
            name: "defect", label: "Defect", parent: "task", isExtendable: true, numberPrefix: "SAMPL", numberStart: 1,
            numberDigits: 8,
            ownFields: [
                S.int("severity", "Severity", "3"), S.string("resolution", "Resolution", 40),
                S.string("keywords", "Keywords", 1000), S.string("symptoms", "Symptoms", 1000),
                S.ref("project", "Project", "project"), S.ref("duplicate_of", "Duplicate of", "defect"),
                S.string("unduplicate_state", "State before duplicate", 40),
            ].map { S.inTable("defect", $0) }
        ),
    ]

    static let choices: [(String, String, [(String, String)])] = [
        ("defect", "state", defectStates.map { ($0.value, $0.label) }),
        ("defect", "severity", [("1", "1-Critical"), ("2", "2-Major"), ("3", "3-Average"), ("4", "4-Minor"),
                                ("5", "5-Enhancement")]),
        ("defect", "priority", [("1", "1-Resolve Immediately"), ("2", "2-Give High Attention"), ("3", "3-Normal Queue"),
                                ("4", "4-Low Priority")]),
        ("defect", "resolution", ["Fixed", "Duplicate", "As Designed", "Not Reproducible", "Deferred", "Won't Fix"]
            .map { ($0, $0) }),
        ("defect", "keywords", ["UI", "Performance", "Security", "Documentation", "Regression", "Crash"]
            .map { ($0, $0) }),
        ("defect", "symptoms", ["Data loss", "Hang", "Wrong result", "Error message", "Cosmetic"].map { ($0, $0) }),
        ("sys_wf_action", "kind", WorkflowActionKind.allCases.map { ($0.rawValue, $0.rawValue) }),
        ("sys_wf_field", "behavior", FieldBehavior.allCases.map { ($0.rawValue, $0.rawValue) }),
    ]

    static let defectStates: [(value: String, label: String, active: Bool)] = [
        ("1", "Submitted", true), ("2", "Assigned", true), ("3", "Opened", true), ("4", "Resolved", true),
        ("5", "Closed", false), ("6", "Duplicate", false), ("7", "Postponed", true),
    ]

    /// A model as seeded: states (value, active), actions (name, kind, sources, destination, roles) and field
    /// behaviours (field, state, action, behaviour).
    struct Seed {
        var table: String
        var states: [(String, Bool)]
        var actions: [(String, WorkflowActionKind, [String], String, [String])] = []
        var fields: [(String, String, String, FieldBehavior)] = []
    }

    /// ServiceNow's tables only say which states end a record's activity (no actions: changes stay permissive).
    /// The Defect model is the predefined Compass one.
    static let models: [Seed] = [
        Seed(table: "task", states: [("-5", true), ("1", true), ("2", true), ("3", false), ("4", false), ("7", false)]),
        Seed(table: "incident", states: [("1", true), ("2", true), ("3", true), ("6", true), ("7", false), ("8", false)]),
        Seed(
            table: "problem", states: ["101", "102", "103", "104", "106"].map { ($0, true) } + [("107", false)],
            actions: problemMoves
        ),
        Seed(table: "change_request", states: ["-5", "-4", "-3", "-2", "-1", "0"].map { ($0, true) } + [("3", false), ("4", false)]),
        Seed(
            table: "defect", states: defectStates.map { ($0.value, $0.active) },
            actions: [
                ("Submit", .submit, [], "1", []),
                ("Assign", .changeState, ["1", "7"], "2", []),
                ("Open", .changeState, ["2"], "3", []),
                ("Resolve", .changeState, ["2", "3"], "4", []),
                ("Close", .changeState, ["4"], "5", []),
                ("Reject", .changeState, ["4"], "3", []),
                ("Re_open", .changeState, ["5"], "3", []),
                ("Postpone", .changeState, ["1", "2", "3"], "7", []),
                ("Duplicate", .duplicate, ["1", "2", "3"], "6", []),
                ("Unduplicate", .unduplicate, ["6"], "", []),
                ("Modify", .modify, [], "", []),
                ("Delete", .delete, [], "", ["itil", "admin"]),
            ],
            fields: [
                ("short_description", "", "", .mandatory), ("severity", "", "", .mandatory),
                ("number", "", "", .readOnly), ("opened_by", "", "", .readOnly), ("opened_at", "", "", .readOnly),
                ("unduplicate_state", "", "", .readOnly),
                ("duplicate_of", "", "", .readOnly), ("duplicate_of", "", "Duplicate", .mandatory),
                ("assigned_to", "", "Assign", .mandatory), ("assigned_to", "2", "", .mandatory),
                ("assigned_to", "3", "", .mandatory),
                ("resolution", "", "Resolve", .mandatory), ("resolution", "4", "", .mandatory),
                ("resolution", "1", "", .readOnly), ("resolution", "2", "", .readOnly),
                ("resolution", "3", "", .readOnly), ("resolution", "7", "", .readOnly),
                // A closed defect is re-opened before it is changed.
                ("short_description", "5", "Modify", .readOnly), ("description", "5", "Modify", .readOnly),
                ("severity", "5", "Modify", .readOnly), ("priority", "5", "Modify", .readOnly),
                ("resolution", "5", "Modify", .readOnly), ("assigned_to", "5", "Modify", .readOnly),
            ]
        ),
    ] + ITSMSchema.models

    /// The moves of ServiceNow's problem state model (New, Assess, Root Cause Analysis, Fix in Progress, Resolved,
    /// Closed): a problem is assessed or analysed, fixed, resolved and closed, and may be closed (canceled, a duplicate)
    /// from any open state; a resolved one may go back to analysis or fixing. Creating a problem in any state is free.
    static let problemMoves: [(String, WorkflowActionKind, [String], String, [String])] = [
        ("Assess", .changeState, ["101"], "102", []),
        ("Analyze root cause", .changeState, ["101", "102", "104", "106"], "103", []),
        ("Fix", .changeState, ["103", "106"], "104", []),
        ("Resolve", .changeState, ["103", "104"], "106", []),
        ("Close", .changeState, ["101", "102", "103", "104", "106"], "107", []),
        ("Back to new", .changeState, ["102"], "101", []),
    ]

    /// The problem model's moves, for databases made before it had them (their stable sys_ids tell which are there;
    /// other models' actions an administrator removed stay removed).
    static func addMissingActions(db: SQLExecutor, now: String) async throws {
        for seed in models where seed.table == "problem" {
            for (index, action) in seed.actions.enumerated() {
                let id = SysID.stable("sys_wf_action:\(seed.table).\(action.0)")
                guard try await db.rows("SELECT sys_id FROM sys_wf_action WHERE sys_id = " + .bind(id)).isEmpty else { continue }
                try await SchemaStore.insertMetadataRow("sys_wf_action", [
                    ("table_name", .text(seed.table)), ("name", .text(action.0)), ("kind", .text(action.1.rawValue)),
                    ("source_states", .text(action.2.joined(separator: ","))), ("destination_state", .text(action.3)),
                    ("roles", .text(action.4.joined(separator: ","))), ("sequence", .integer(index * 10)),
                    ("active", .integer(1)),
                ], id: id, db: db, now: now)
            }
        }
    }

    /// Writes the seeded models of `tables` (their states, actions and field behaviours).
    static func writeModels(for tables: Set<String>, db: SQLExecutor, now: String) async throws {
        for seed in models where tables.contains(seed.table) {
            for (index, state) in seed.states.enumerated() {
                try await SchemaStore.insertMetadataRow("sys_wf_state", [
                    ("table_name", .text(seed.table)), ("value", .text(state.0)), ("active", .integer(state.1 ? 1 : 0)),
                    ("sequence", .integer(index * 10)),
                ], id: SysID.stable("sys_wf_state:\(seed.table).\(state.0)"), db: db, now: now)
            }
            for (index, action) in seed.actions.enumerated() {
                try await SchemaStore.insertMetadataRow("sys_wf_action", [
                    ("table_name", .text(seed.table)), ("name", .text(action.0)), ("kind", .text(action.1.rawValue)),
                    ("source_states", .text(action.2.joined(separator: ","))), ("destination_state", .text(action.3)),
                    ("roles", .text(action.4.joined(separator: ","))), ("sequence", .integer(index * 10)),
                    ("active", .integer(1)),
                ], id: SysID.stable("sys_wf_action:\(seed.table).\(action.0)"), db: db, now: now)
            }
            for field in seed.fields {
                try await SchemaStore.insertMetadataRow("sys_wf_field", [
                    ("table_name", .text(seed.table)), ("field", .text(field.0)), ("state", .text(field.1)),
                    ("action", .text(field.2)), ("behavior", .text(field.3.rawValue)),
                ], id: SysID.stable("sys_wf_field:\(seed.table).\(field.0).\(field.1).\(field.2)"), db: db, now: now)
            }
        }
    }
}
