import DocketModel

/// The ServiceNow that operations teams automate, as catalog data: change management (change tasks and standard
/// change templates), the CMDB's class hierarchy and relationships, the service catalog (catalogs, categories,
/// items with variables, requests, requested items, catalog tasks, carts) and problem tasks. Every table here is
/// served by the same engine as `incident`: the Table API, access rules, business rules, live updates, the event log.
enum ITSMSchema {
    typealias B = BaseSchema

    static let tables: [TableDefinition] = change + cmdb + catalog + problem

    // MARK: Change management

    static let change: [TableDefinition] = [
        TableDefinition(
            name: "change_task", label: "Change Task", parent: "task", isExtendable: true, numberPrefix: "CTASK",
            numberStart: 10001,
            ownFields: [
                B.ref("change_request", "Change request", "change_request"),
                B.string("change_task_type", "Type", 40, defaultValue: "planning"),
                B.bool("on_hold", "On hold"), B.string("on_hold_reason", "On hold reason", 4000),
                B.glideDateTime("planned_start_date", "Planned start date"),
                B.glideDateTime("planned_end_date", "Planned end date"),
                B.string("close_code", "Close code", 40),
            ].map { B.inTable("change_task", $0) }, indexes: [["change_request"]]
        ),
        // A standard change template: the record producer holds the field values (`template`, an encoded query of
        // field=value pairs), and each published version of it is what a change names.
        B.table("std_change_record_producer", "Standard Change Template", display: "name", [
            B.string("name", "Name", 100), B.string("short_description", "Short description", 160),
            B.string("description", "Description", 4000), B.bool("active", "Active", "true"),
            B.string("template", "Template", 65_000), B.string("category", "Category", 80),
        ], indexes: [["name"]]),
        B.table("std_change_producer_version", "Standard Change Template Version", display: "name", [
            B.string("name", "Name", 255), B.int("version", "Version", "1"),
            B.ref("std_change_producer", "Template", "std_change_record_producer"),
        ], indexes: [["name"]]),
    ]

    /// Fields change_request gains beyond those it had before step 18.
    static let changeRequestFields: [FieldDefinition] = [
        B.string("category", "Category", 40, defaultValue: "Other"), B.string("close_code", "Close code", 40),
        B.string("chg_model", "Model", 40), B.string("on_hold_reason", "On hold reason", 4000),
        B.ref("std_change_producer_version", "Standard change template version", "std_change_producer_version"),
        B.string("justification", "Justification", 4000), B.string("reason", "Reason", 40),
        B.glideDateTime("cab_date", "CAB date"), B.string("phase", "Phase", 40, defaultValue: "requested"),
    ].map { B.inTable("change_request", $0) }

    /// Fields problem gains: its category and subcategory, as on a developer instance.
    static let problemFields: [FieldDefinition] = [
        B.string("category", "Category", 40), B.string("subcategory", "Subcategory", 40),
    ].map { B.inTable("problem", $0) }

    // MARK: CMDB

    static let cmdb: [TableDefinition] = [
        TableDefinition(
            name: "cmdb_ci", label: "Configuration Item", parent: nil, isExtendable: true, numberPrefix: nil,
            numberStart: 1,
            ownFields: [
                FieldDefinition(table: "cmdb_ci", name: "name", label: "Name", type: .string, maxLength: 255, isDisplay: true),
                B.string("short_description", "Description", 1000), B.string("asset_tag", "Asset tag", 40),
                B.string("serial_number", "Serial number", 255), B.string("model_number", "Model number", 255),
                B.string("ip_address", "IP Address", 255), B.string("mac_address", "MAC Address", 255),
                B.string("fqdn", "Fully qualified domain name", 255), B.string("dns_domain", "DNS Domain", 255),
                B.int("install_status", "Install Status", "1"), B.int("operational_status", "Operational status", "1"),
                B.string("category", "Category", 40), B.string("subcategory", "Subcategory", 40),
                B.string("environment", "Environment", 40), B.string("used_for", "Used for", 40),
                B.ref("assigned_to", "Assigned to", "sys_user"), B.ref("managed_by", "Managed by", "sys_user"),
                B.ref("owned_by", "Owned by", "sys_user"), B.ref("support_group", "Support group", "sys_user_group"),
                B.ref("assignment_group", "Change Group", "sys_user_group"),
                B.ref("location", "Location", "cmn_location"), B.string("manufacturer", "Manufacturer", 100),
                B.string("vendor", "Vendor", 100), B.string("discovery_source", "Discovery source", 40),
                B.string("firewall_status", "Firewall status", 40), B.string("comments", "Comments", 4000),
                B.string("object_id", "Object ID", 255), B.string("attributes", "Attributes", 4000),
                B.glideDateTime("install_date", "Installed"), B.glideDateTime("last_discovered", "Most recent discovery"),
            ].map { B.inTable("cmdb_ci", $0) }, indexes: [["name"]]
        ),
        ci("cmdb_ci_hardware", "Hardware", parent: "cmdb_ci", [
            B.string("hardware_status", "Hardware Status", 40, defaultValue: "installed"),
            B.string("hardware_substatus", "Hardware Substatus", 40),
        ]),
        ci("cmdb_ci_computer", "Computer", parent: "cmdb_ci_hardware", [
            B.int("cpu_count", "CPU count"), B.string("cpu_name", "CPU name", 255), B.int("cpu_speed", "CPU speed (MHz)"),
            B.int("cpu_core_count", "CPU core count"), B.int("ram", "RAM (MB)"), B.int("disk_space", "Disk space (GB)"),
            B.string("os", "Operating System", 100), B.string("os_version", "OS Version", 100),
            B.string("os_domain", "OS Domain", 100), B.string("host_name", "Host name", 255),
            B.bool("virtual", "Is Virtual"), B.string("form_factor", "Form factor", 40),
        ]),
        ci("cmdb_ci_server", "Server", parent: "cmdb_ci_computer", [
            B.string("classification", "Classification", 40, defaultValue: "Production"),
        ]),
        ci("cmdb_ci_linux_server", "Linux Server", parent: "cmdb_ci_server", [
            B.string("kernel_release", "Kernel release", 100),
        ]),
        ci("cmdb_ci_win_server", "Windows Server", parent: "cmdb_ci_server", []),
        ci("cmdb_ci_unix_server", "UNIX Server", parent: "cmdb_ci_server", []),
        ci("cmdb_ci_netgear", "Network Gear", parent: "cmdb_ci_hardware", [
            B.int("ports", "Ports"), B.string("device_type", "Device type", 40),
        ]),
        ci("cmdb_ci_ip_router", "IP Router", parent: "cmdb_ci_netgear", []),
        ci("cmdb_ci_ip_switch", "IP Switch", parent: "cmdb_ci_netgear", []),
        ci("cmdb_ci_vm_object", "Virtual Machine Object", parent: "cmdb_ci", []),
        ci("cmdb_ci_vm_instance", "Virtual Machine Instance", parent: "cmdb_ci_vm_object", [
            B.string("state", "State", 40), B.string("guest_os_fullname", "Guest OS full name", 255),
            B.string("vm_inst_id", "Instance ID", 255), B.int("cpus", "CPUs"), B.int("memory", "Memory (MB)"),
            B.int("disks", "Disks"), B.int("disks_size", "Disks size (GB)"),
        ]),
        ci("cmdb_ci_ec2_instance", "Amazon EC2 Instance", parent: "cmdb_ci_vm_instance", []),
        ci("cmdb_ci_azure_instance", "Azure Virtual Machine Instance", parent: "cmdb_ci_vm_instance", []),
        ci("cmdb_ci_appl", "Application", parent: "cmdb_ci", [
            B.string("version", "Version", 40), B.string("install_directory", "Install directory", 255),
            B.ref("running_on", "Running on", "cmdb_ci"),
        ]),
        ci("cmdb_ci_database", "Database", parent: "cmdb_ci", [B.string("type", "Type", 40)]),
        ci("cmdb_ci_service", "Service", parent: "cmdb_ci", [
            B.string("service_classification", "Service classification", 40, defaultValue: "Business Service"),
            B.string("busines_criticality", "Business criticality", 40),
        ]),
        B.table("cmdb_rel_type", "CI Relationship Type", display: "name", [
            B.string("name", "Name", 255), B.string("sys_name", "System name", 255),
            B.string("parent_descriptor", "Parent descriptor", 100),
            B.string("child_descriptor", "Child descriptor", 100),
        ], indexes: [["name"]]),
        B.table("cmdb_rel_ci", "CI Relationship", display: nil, [
            B.ref("parent", "Parent", "cmdb_ci"), B.ref("child", "Child", "cmdb_ci"),
            B.ref("type", "Type", "cmdb_rel_type"), B.string("connection_strength", "Connection strength", 40),
            B.int("port", "Port"),
        ], indexes: [["parent"], ["child"]]),
    ]

    static func ci(_ name: String, _ label: String, parent: String, _ fields: [FieldDefinition]) -> TableDefinition {
        TableDefinition(
            name: name, label: label, parent: parent, isExtendable: true, numberPrefix: nil, numberStart: 1,
            ownFields: fields.map { B.inTable(name, $0) }
        )
    }

    // MARK: Service catalog

    static let catalog: [TableDefinition] = [
        B.table("sc_catalog", "Catalog", display: "title", [
            B.string("title", "Title", 100), B.string("description", "Description", 4000),
            B.bool("active", "Active", "true"), B.ref("manager", "Manager", "sys_user"),
        ]),
        B.table("sc_category", "Category", display: "title", [
            B.string("title", "Title", 100), B.string("description", "Description", 4000),
            B.string("full_description", "Full description", 4000),
            B.ref("sc_catalog", "Catalog", "sc_catalog"), B.ref("parent", "Parent", "sc_category"),
            B.bool("active", "Active", "true"), B.int("order", "Order", "0"),
        ], indexes: [["sc_catalog"]]),
        B.table("sc_cat_item", "Catalog Item", display: "name", [
            B.string("name", "Name", 100), B.string("short_description", "Short description", 1000),
            B.string("description", "Description", 8000), B.ref("category", "Category", "sc_category"),
            // The catalogs an item is in, comma-separated sys_ids (a glide list, as on an instance).
            B.string("sc_catalogs", "Catalogs", 4000), B.bool("active", "Active", "true"),
            B.string("price", "Price", 40, defaultValue: "0"), B.int("order", "Order", "0"),
            B.string("availability", "Availability", 40, defaultValue: "on_desktop"),
            B.string("type", "Type", 40, defaultValue: "item"), B.bool("mandatory_attachment", "Mandatory attachment"),
            B.bool("no_quantity", "Hide quantity"), B.ref("group", "Fulfillment group", "sys_user_group"),
        ], indexes: [["category"]]),
        // A catalog item's variables (its questions).
        B.table("item_option_new", "Variable", display: "question_text", [
            B.ref("cat_item", "Catalog item", "sc_cat_item"), B.string("name", "Name", 100),
            B.string("question_text", "Question", 255), B.int("type", "Type", "6"), B.bool("mandatory", "Mandatory"),
            B.int("order", "Order", "100"), B.string("default_value", "Default value", 4000),
            B.string("help_text", "Help text", 4000), B.bool("active", "Active", "true"),
        ], indexes: [["cat_item"]]),
        TableDefinition(
            name: "sc_request", label: "Request", parent: "task", isExtendable: true, numberPrefix: "REQ",
            numberStart: 10001,
            ownFields: [
                B.ref("requested_for", "Requested for", "sys_user", defaultValue: "javascript:gs.getUserID()"),
                B.ref("requested_by", "Requested by", "sys_user"),
                B.string("request_state", "Request state", 40, defaultValue: "requested"),
                B.string("stage", "Stage", 40, defaultValue: "requested"),
                B.string("special_instructions", "Special instructions", 4000),
                B.string("business_justification", "Business justification", 4000),
                B.string("price", "Price", 40, defaultValue: "0"), B.string("delivery_address", "Delivery address", 4000),
            ].map { B.inTable("sc_request", $0) }, indexes: [["requested_for"]]
        ),
        TableDefinition(
            name: "sc_req_item", label: "Requested Item", parent: "task", isExtendable: true, numberPrefix: "RITM",
            numberStart: 10001,
            ownFields: [
                B.ref("request", "Request", "sc_request"), B.ref("cat_item", "Item", "sc_cat_item"),
                B.int("quantity", "Quantity", "1"),
                B.ref("requested_for", "Requested for", "sys_user", defaultValue: "javascript:gs.getUserID()"),
                B.string("stage", "Stage", 40, defaultValue: "request_approved"), B.string("price", "Price", 40),
                B.ref("configuration_item", "Configuration item", "cmdb_ci"),
            ].map { B.inTable("sc_req_item", $0) }, indexes: [["request"]]
        ),
        TableDefinition(
            name: "sc_task", label: "Catalog Task", parent: "task", isExtendable: true, numberPrefix: "SCTASK",
            numberStart: 10001,
            ownFields: [
                B.ref("request_item", "Request item", "sc_req_item"), B.ref("request", "Request", "sc_request"),
                B.string("delivery_plan", "Delivery plan", 255), B.string("delivery_task", "Delivery task", 255),
                B.string("vendor", "Vendor", 255),
            ].map { B.inTable("sc_task", $0) }, indexes: [["request_item"], ["request"]]
        ),
        // The answers to an item's variables, linked to the requested item they were given for.
        B.table("sc_item_option", "Options", display: "value", [
            B.ref("item_option_new", "Question", "item_option_new"), B.string("value", "Value", 4000),
            B.int("order", "Order", "0"),
        ]),
        B.table("sc_item_option_mtom", "Variable Ownership", display: nil, [
            B.ref("request_item", "Parent item", "sc_req_item"), B.ref("sc_item_option", "Dependent item", "sc_item_option"),
        ], indexes: [["request_item"]]),
        // Each user's cart, and what is in it (`variables`: the answers as a JSON object).
        B.table("sc_cart", "Cart", display: "name", [
            B.string("name", "Name", 40, defaultValue: "DEFAULT"), B.ref("user", "User", "sys_user"),
        ], indexes: [["user"]]),
        B.table("sc_cart_item", "Cart Item", display: nil, [
            B.ref("cart", "Cart", "sc_cart"), B.ref("cat_item", "Item", "sc_cat_item"), B.int("quantity", "Quantity", "1"),
            B.ref("requested_for", "Requested for", "sys_user"), B.string("variables", "Variables", 65_000),
            B.bool("active", "Active", "true"),
            // Whose line it is (the cart's user): what the access rule judges.
            B.ref("user", "User", "sys_user", defaultValue: "javascript:gs.getUserID()"),
        ], indexes: [["cart"]]),
    ]

    // MARK: Problem tasks

    static let problem: [TableDefinition] = [
        TableDefinition(
            name: "problem_task", label: "Problem Task", parent: "task", isExtendable: true, numberPrefix: "PTASK",
            numberStart: 10001,
            ownFields: [
                B.ref("problem", "Problem", "problem"),
                B.string("problem_task_type", "Type", 40, defaultValue: "general"),
                B.string("cause_code", "Cause code", 40), B.string("close_code", "Close code", 40),
                B.string("fix_notes", "Fix notes", 4000), B.string("other_reason", "Other reason", 4000),
                B.string("cause_notes", "Cause notes", 4000), B.string("workaround", "Workaround", 4000),
            ].map { B.inTable("problem_task", $0) }, indexes: [["problem"]]
        ),
    ]

    /// Fields every task gains (`approval`, `cmdb_ci`, `user_input`, …), as a developer instance's task has them.
    static let taskFields: [FieldDefinition] = [
        B.string("approval", "Approval", 40, defaultValue: "not requested"),
        B.ref("cmdb_ci", "Configuration item", "cmdb_ci"), B.string("user_input", "User input", 4000),
        B.int("order", "Order"), B.ref("business_service", "Service", "cmdb_ci_service"),
        B.glideDateTime("expected_start", "Expected start"), B.glideDateTime("work_start", "Actual start"),
        B.glideDateTime("work_end", "Actual end"), B.string("follow_up", "Follow up", 40),
        B.string("upon_approval", "Upon approval", 40, defaultValue: "proceed"),
        B.string("upon_reject", "Upon reject", 40, defaultValue: "cancel"),
        B.bool("knowledge", "Knowledge"), B.bool("made_sla", "Made SLA", "true"),
        B.string("time_worked", "Time worked", 40), B.string("additional_assignee_list", "Additional assignee list", 4000),
    ].map { B.inTable("task", $0) }

    // MARK: Choices

    static let choices: [(String, String, [(String, String)])] = [
        ("change_request", "category", [("Hardware", "Hardware"), ("Software", "Software"), ("Service", "Service"),
                                        ("System Software", "System Software"),
                                        ("Applications Software", "Applications Software"), ("Network", "Network"),
                                        ("Telecom", "Telecom"), ("Documentation", "Documentation"), ("Other", "Other")]),
        ("change_request", "close_code", [("successful", "Successful"), ("successful_issues", "Successful with issues"),
                                          ("unsuccessful", "Unsuccessful")]),
        ("change_task", "state", [("-5", "Pending"), ("1", "Open"), ("2", "In Progress"), ("3", "Closed"),
                                  ("4", "Canceled")]),
        ("change_task", "change_task_type", [("planning", "Planning"), ("implementation", "Implementation"),
                                             ("testing", "Testing"), ("review", "Review")]),
        ("change_task", "close_code", [("successful", "Successful"), ("successful_issues", "Successful with issues"),
                                       ("unsuccessful", "Unsuccessful")]),
        ("task", "approval", [("not requested", "Not Yet Requested"), ("requested", "Requested"),
                              ("approved", "Approved"), ("rejected", "Rejected"), ("cancelled", "Cancelled"),
                              ("not_required", "No Longer Required"), ("duplicate", "Duplicate")]),
        ("cmdb_ci", "install_status", [("1", "Installed"), ("0", "Implementing"), ("2", "On Order"),
                                       ("3", "In Maintenance"), ("4", "Pending Install"), ("5", "Pending Repair"),
                                       ("6", "In Stock"), ("7", "Retired"), ("8", "Stolen"), ("100", "Absent")]),
        ("cmdb_ci", "operational_status", [("1", "Operational"), ("2", "Non-Operational"), ("3", "Repair in Progress"),
                                           ("4", "DR Standby"), ("5", "Ready"), ("6", "Retired"), ("7", "Pipeline"),
                                           ("8", "Catalog")]),
        ("cmdb_ci", "environment", [("Development", "Development"), ("Production", "Production"), ("Test", "Test")]),
        ("cmdb_ci", "category", [("hardware", "Hardware"), ("software", "Software"), ("network", "Network")]),
        ("cmdb_ci_vm_instance", "state", [("on", "On"), ("off", "Off"), ("paused", "Paused"), ("standby", "Standby"),
                                          ("terminated", "Terminated"), ("error", "Error")]),
        ("cmdb_ci_server", "classification", [("Production", "Production"), ("Development", "Development"),
                                              ("Test", "Test"), ("Staging", "Staging")]),
        ("sc_request", "request_state", [("draft", "Draft"), ("requested", "Pending Approval"),
                                         ("in_process", "Approved"), ("closed_complete", "Closed Complete"),
                                         ("closed_incomplete", "Closed Incomplete"),
                                         ("closed_cancelled", "Closed Cancelled"),
                                         ("closed_rejected", "Closed Rejected"), ("closed_skipped", "Closed Skipped")]),
        ("sc_request", "stage", [("requested", "Requested"), ("fulfillment", "Fulfillment"),
                                 ("delivery", "Delivery"), ("closed_complete", "Completed"),
                                 ("closed_incomplete", "Closed Incomplete")]),
        ("sc_req_item", "stage", [("request_approved", "Request Approved"), ("waiting_for_approval", "Waiting for Approval"),
                                  ("fulfillment", "Fulfillment"), ("delivery", "Delivery"), ("complete", "Completed"),
                                  ("Request Cancelled", "Request Cancelled")]),
        ("sc_task", "state", [("-5", "Pending"), ("1", "Open"), ("2", "Work in Progress"), ("3", "Closed Complete"),
                              ("4", "Closed Incomplete"), ("7", "Closed Skipped")]),
        ("item_option_new", "type", [("1", "Yes / No"), ("2", "Multi Line Text"), ("3", "Multiple Choice"),
                                     ("5", "Select Box"), ("6", "Single Line Text"), ("7", "CheckBox"),
                                     ("8", "Reference"), ("9", "Date"), ("10", "Date/Time")]),
        ("problem", "category", [("software", "Software"), ("hardware", "Hardware"), ("network", "Network"),
                                  ("database", "Database")]),
        ("problem_task", "state", [("151", "New"), ("152", "Assess"), ("154", "Work in Progress"), ("157", "Closed")]),
        ("problem_task", "problem_task_type", [("general", "General"), ("rca", "Root Cause Analysis")]),
        ("problem_task", "close_code", [("canceled", "Canceled"), ("completed", "Completed")]),
    ]

    /// Default `state` of new records of these tables.
    static let initialStates: [String: String] = [
        "change_task": "1", "sc_request": "1", "sc_req_item": "1", "sc_task": "1", "problem_task": "151",
    ]

    /// State models: which states end a record's activity.
    static let models: [WorkflowSchema.Seed] = [
        .init(table: "change_task", states: [("-5", true), ("1", true), ("2", true), ("3", false), ("4", false)]),
        .init(table: "problem_task", states: [("151", true), ("152", true), ("154", true), ("157", false)]),
        .init(table: "sc_task", states: [("-5", true), ("1", true), ("2", true), ("3", false), ("4", false), ("7", false)]),
    ]
}

extension ITSMSchema {
    /// Relationship types an instance ships (`sys_name` is the name, as on an instance).
    static let relationTypes: [(parent: String, child: String)] = [
        ("Depends on", "Used by"), ("Runs on", "Runs"), ("Contains", "Contained by"), ("Cools", "Cooled By"),
        ("Hosted on", "Hosts"), ("Connects to", "Connected by"), ("Members", "Member of"), ("Uses", "Used by"),
        ("Virtualized by", "Virtualizes"), ("Sends data to", "Receives data from"), ("Provides", "Provided by"),
        ("Owns", "Owned by"), ("Backs up", "Backed up by"), ("Powers", "Powered by"), ("Located in", "Houses"),
    ]

    static func relationTypeID(_ name: String) -> String { SysID.stable("cmdb_rel_type:\(name)") }

    /// Business rules an instance ships for these tables (data in `sys_script`, like any administrator's rule):
    /// a submitted request is approved for fulfilment at once (no approval engine runs here).
    static let rules: [(name: String, table: String, filter: String, template: String)] = [
        ("Approve submitted requests", "sc_request", "request_state=submitted", "request_state=in_process"),
    ]

    /// Writes the choices of fields that tables existing before this step gained (a new table's come with it),
    /// the relationship types and the business rules. Rows already there (by their stable sys_id) are kept.
    static func seed(_ db: SQLExecutor, now: String) async throws {
        func missing(_ table: String, _ id: String) async throws -> Bool {
            try await db.rows("SELECT sys_id FROM " + .identifier(table) + " WHERE sys_id = " + .bind(id)).isEmpty
        }
        for (table, field, list) in choices {
            for (index, (value, label)) in list.enumerated() {
                let id = SysID.stable("sys_choice:\(table).\(field).\(value)")
                guard try await missing("sys_choice", id) else { continue }
                try await SchemaStore.insertMetadataRow("sys_choice", [
                    ("name", .text(table)), ("element", .text(field)), ("value", .text(value)),
                    ("label", .text(label)), ("sequence", .integer(index * 10)), ("inactive", .integer(0)),
                    ("language", .text("en")),
                ], id: id, db: db, now: now)
            }
        }
        for type in relationTypes {
            let name = "\(type.parent)::\(type.child)"
            let id = relationTypeID(name)
            guard try await missing("cmdb_rel_type", id) else { continue }
            try await SchemaStore.insertMetadataRow("cmdb_rel_type", [
                ("name", .text(name)), ("sys_name", .text(name)), ("parent_descriptor", .text(type.parent)),
                ("child_descriptor", .text(type.child)),
            ], id: id, db: db, now: now)
        }
        for rule in rules {
            let id = SysID.stable("sys_script:\(rule.table).\(rule.name)")
            guard try await missing("sys_script", id) else { continue }
            try await SchemaStore.insertMetadataRow("sys_script", [
                ("name", .text(rule.name)), ("collection", .text(rule.table)), ("active", .integer(1)),
                ("when", .text("before")), ("order", .integer(100)), ("action_insert", .integer(1)),
                ("action_update", .integer(1)), ("action_delete", .integer(0)), ("action_query", .integer(0)),
                ("filter_condition", .text(rule.filter)), ("template", .text(rule.template)),
                ("abort_action", .integer(0)), ("add_message", .integer(0)), ("advanced", .integer(0)),
            ], id: id, db: db, now: now)
        }
    }
}
