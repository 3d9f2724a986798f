import DocketModel

/// What an access rule allows.
enum AccessOperation: String, Sendable, Hashable, CaseIterable {
    case read, create, write, delete
}

/// One access rule: on a table (and the tables that extend it), for callers holding one of `roles` (any
/// authenticated caller when empty), an operation is allowed on the records matching `condition`.
struct AccessRule: Sendable {
    enum Condition: Sendable {
        /// Every record.
        case always
        /// Records matching an encoded query, which may use dynamic values (`javascript:gs.getUserID()`).
        case query(EncodedQuery)
        /// Records belonging to a parent record on which the caller may perform `operation` (read for journal
        /// entries and for listing attachments, write for adding or deleting attachments): `tableColumn` holds the
        /// parent's table name and `idColumn` its sys_id.
        case parentRecordAllows(AccessOperation, tableColumn: String, idColumn: String)
    }

    var table: String
    var operations: Set<AccessOperation>
    var roles: Set<String>
    var condition: Condition
    /// For writes: the only fields the rule lets the caller change (nil: any field).
    var writableFields: Set<String>?

    init(
        _ table: String, _ operations: Set<AccessOperation>, roles: Set<String> = [], condition: Condition = .always,
        writableFields: Set<String>? = nil
    ) {
        self.table = table
        self.operations = operations
        self.roles = roles
        self.condition = condition
        self.writableFields = writableFields
    }
}

/// The access rules of an instance. Admins pass every rule; everybody else needs a rule that grants the
/// operation, or is denied (reads of lists are filtered instead, as ServiceNow does).
struct AccessPolicy: Sendable {
    let rules: [AccessRule]
    /// The positions in ``rules`` of each table's rules, in order: a table's are found without looking at every
    /// rule (every request asks, several times).
    private let positions: [String: [Int]]

    init(rules: [AccessRule]) {
        self.rules = rules
        positions = rules.indices.reduce(into: [:]) { positions, index in positions[rules[index].table, default: []].append(index) }
    }

    /// The rules that grant `operation` on `table` to `caller`, in the order they are written.
    func rules(for operation: AccessOperation, on table: SchemaCatalog.Table, caller: Caller) -> [AccessRule] {
        var found: [Int] = []
        for ancestor in table.ancestry {
            if let indices = positions[ancestor] { found += indices }
        }
        // Each ancestor's positions are in order; those of several are put back in the rules' order.
        if table.ancestry.count > 1 { found.sort() }
        var granted: [AccessRule] = []
        for index in found {
            let rule = rules[index]
            if rule.operations.contains(operation) && caller.hasAnyRole(rule.roles) { granted.append(rule) }
        }
        // A custom table created through sys_db_object comes with a role, `<table>_user`, that may do
        // everything on it (ServiceNow's "create access controls" default).
        let role = Self.customTableRole(table.root)
        if let role, caller.roles.contains(role) {
            granted.append(AccessRule(table.root, Set(AccessOperation.allCases), roles: [role]))
        }
        return granted
    }

    /// The rules written on `table` itself (not on a table it extends) that grant `operation` to `caller`.
    func ownRules(for operation: AccessOperation, on table: SchemaCatalog.Table, caller: Caller) -> [AccessRule] {
        (positions[table.name] ?? []).map { rules[$0] }.filter { $0.operations.contains(operation) && caller.hasAnyRole($0.roles) }
    }

    /// The role that grants access to a custom root table (`u_widget` → `u_widget_user`); nil for base tables.
    static func customTableRole(_ root: String) -> String? {
        root.hasPrefix("u_") || root.hasPrefix("x_") ? root + "_user" : nil
    }

    /// The rules a new instance starts with.
    static let standard: AccessPolicy = {
        let involved = try! EncodedQuery(
            "assigned_to=javascript:gs.getUserID()^ORopened_by=javascript:gs.getUserID()"
                + "^ORcaller_id=javascript:gs.getUserID()^ORrequested_for=javascript:gs.getUserID()"
        )
        let own = try! EncodedQuery("user=javascript:gs.getUserID()")
        let everyone: [String] = [
            "sys_user", "sys_user_group", "sys_user_role", "sys_choice", "sys_db_object", "sys_dictionary",
            "sys_number", "cmn_department", "cmn_location", "sys_wf_state", "sys_wf_action", "sys_wf_field", "project",
            // The service catalog's shop window, the CMDB's relationship types and the standard change templates.
            "sc_catalog", "sc_category", "sc_cat_item", "item_option_new", "cmdb_rel_type", "std_change_record_producer",
            "std_change_producer_version",
        ]
        return AccessPolicy(
            rules: [
                AccessRule("task", [.read, .create, .write, .delete], roles: ["itil"]),
                AccessRule("task", [.read], condition: .query(involved)),
                AccessRule("task", [.write], condition: .query(involved), writableFields: ["comments", "work_notes"]),
                AccessRule(
                    "sys_journal_field", [.read],
                    condition: .parentRecordAllows(.read, tableColumn: "name", idColumn: "element_id")
                ),
                // Attachments follow their record: whoever may read it may list and download them; adding or
                // deleting one needs write access to the record.
                AccessRule(
                    "sys_attachment", [.read],
                    condition: .parentRecordAllows(.read, tableColumn: "table_name", idColumn: "table_sys_id")
                ),
                AccessRule(
                    "sys_attachment", [.create, .delete],
                    condition: .parentRecordAllows(.write, tableColumn: "table_name", idColumn: "table_sys_id")
                ),
                AccessRule("sys_user_grmember", [.read], roles: ["itil"]),
                AccessRule("sys_user_grmember", [.read], condition: .query(own)),
                AccessRule("sys_user_has_role", [.read], roles: ["itil"]),
                AccessRule("sys_group_has_role", [.read], roles: ["itil"]),
                AccessRule("sys_user_has_role", [.read], condition: .query(own)),
                AccessRule("kb_knowledge", [.read, .create, .write], roles: ["itil"]),
                // The CMDB: fulfillers read and maintain configuration items and their relationships.
                AccessRule("cmdb_ci", [.read, .create, .write, .delete], roles: ["itil"]),
                AccessRule("cmdb_rel_ci", [.read, .create, .write, .delete], roles: ["itil"]),
                // Requests and requested items: fulfillers see all of them (as tasks), a catalog user what they opened
                // or is requested for them (the task rule). The answers to variables are read by fulfillers.
                AccessRule("sc_item_option_mtom", [.read], roles: ["itil"]),
                AccessRule("sc_item_option", [.read], roles: ["itil"]),
                // Each user's own cart and its lines; a line's owner and cart never change (else a line could be
                // handed to someone else's cart, to be ordered in their name).
                AccessRule("sc_cart", [.read, .create, .delete], condition: .query(own)),
                AccessRule("sc_cart_item", [.read, .create, .delete], condition: .query(own)),
                AccessRule(
                    "sc_cart_item", [.write], condition: .query(own),
                    writableFields: ["quantity", "variables", "requested_for", "active"]
                ),
                // Defects, as a Compass database has them: everyone signed in reads and submits them; whoever owns
                // or submitted one changes it (through its actions); itil may do everything, as with every task.
                AccessRule("defect", [.read, .create]),
                AccessRule("defect", [.write], condition: .query(involved)),
                AccessRule("project", [.create, .write], roles: ["itil"]),
                // Saved queries: each user's own, and the public ones for everyone to read.
                AccessRule("sys_saved_query", [.read, .create, .write, .delete], condition: .query(own)),
                AccessRule("sys_saved_query", [.read], condition: .query(try! EncodedQuery("folder=public"))),
                // Each user's own preferences; whose it is and its name never change.
                AccessRule("sys_user_preference", [.read, .create, .delete], condition: .query(own)),
                AccessRule("sys_user_preference", [.write], condition: .query(own), writableFields: ["value", "description"]),
                // A record's action history is read by whoever may read the record.
                AccessRule(
                    "sys_wf_history", [.read],
                    condition: .parentRecordAllows(.read, tableColumn: "table_name", idColumn: "document")
                ),
                // The DataSync showcase's shared task list: every signed-in user reads and changes every task.
                AccessRule("datasync_task", [.read, .create, .write, .delete]),
                // Each user reads where they are staff; enterprises, sites and programs are administered by admins.
                AccessRule("sys_site_member", [.read], condition: .query(own)),
                // Participants: every signed-in user works with them, within the user's enterprises (the engine
                // adds that to every rule of a scoped table).
                AccessRule("eto_participant", [.read, .create, .write]),
                AccessRule("eto_enrollment", [.read, .create, .write]),
                AccessRule("eto_touchpoint", [.read]), AccessRule("eto_response", [.read, .create, .write]),
                AccessRule("sys_enterprise", [.read]), AccessRule("sys_site", [.read]), AccessRule("sys_program", [.read]),
                AccessRule("kb_knowledge", [.read], condition: .query(try! EncodedQuery("workflow_state=published"))),
            ] + NotificationSchema.access + everyone.map { AccessRule($0, [.read]) }
        )
    }()
}
