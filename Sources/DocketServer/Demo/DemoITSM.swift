import DocketModel
import Foundation

/// The demo instance's change templates, configuration items, service catalog, changes and problem tasks: what a
/// developer instance has and what automation (Ansible's servicenow.itsm and its examples) names.
enum DemoITSM {
    static func id(_ kind: String, _ index: Int) -> String { DemoData.id("itsm.\(kind)", index) }
    static func groupID(_ name: String) -> String {
        DemoData.id("group", (DemoData.groups.firstIndex { $0.name == name } ?? 0) + 1)
    }

    /// Standard change templates: name, category and field values (applied to a change made from them).
    static let templates: [(name: String, category: String, values: [(String, String)])] = [
        ("Clear BGP sessions on a Cisco router", "Network", [
            ("short_description", "Clear BGP sessions on a Cisco router"),
            ("description", "Resend the complete BGP table to neighboring routers\n\n--Both neighbors need to support "
                + "soft reset route refresh capability.\n--Stores complete BGP table of your neighbor in router memory.\n"
                + "--Not a good idea on a peering router with full feed, due to the memory requirements."),
            ("implementation_plan", "-- Place router into maintenance mode in the monitoring platform\n-- Logon to "
                + "router through SSH\n-- Run the command: clear ip bgp * soft\n-- Take router out of maintenance mode"),
            ("backout_plan", "Due to the limited number of commands in the implementation plan it is not possible to "
                + "back out the change. Raise an incident if the sessions do not come back."),
            ("test_plan", "--Confirm that there are no monitoring alerts for the router"),
            ("category", "Network"), ("risk", "4"), ("impact", "3"),
        ]),
        ("Reboot Windows Server", "Hardware", [
            ("short_description", "Reboot Windows Server"),
            ("description", "Reboot a Windows server during its maintenance window"),
            ("implementation_plan", "-- Drain the server from its load balancer pool\n-- Reboot\n-- Add it back"),
            ("backout_plan", "None needed: the server returns to service after the reboot"),
            ("test_plan", "-- Check the server answers its health probe"), ("category", "Hardware"),
        ]),
        ("Add network switch to datacenter cabinet", "Network", [
            ("short_description", "Add network switch to datacenter cabinet"),
            ("description", "Rack, cable and configure a new access switch"), ("category", "Network"),
        ]),
    ]

    /// Configuration items: class, name, IP address, OS, description, location index, support group.
    static let items: [(String, String, String, String, String, Int, String)] = [
        ("cmdb_ci_linux_server", "lnux100", "10.0.0.100", "Linux Red Hat", "Web server for the intranet", 1, "Platform Administrators"),
        ("cmdb_ci_linux_server", "lnux101", "10.0.0.101", "Linux Red Hat", "Application server for SAP", 1, "Platform Administrators"),
        ("cmdb_ci_win_server", "EXCH-SD-05", "10.0.1.5", "Windows 2019 Server", "Exchange mail server", 1, "Platform Administrators"),
        ("cmdb_ci_server", "sap-db-01", "10.0.0.150", "Linux SuSE", "SAP database host", 2, "Database"),
        ("cmdb_ci_ip_router", "Cisco-SD-RTR-01", "10.0.255.1", "", "Core router, San Diego", 1, "Network"),
        ("cmdb_ci_ip_switch", "Cisco-SD-SW-01", "10.0.255.10", "", "Access switch, floor 2", 1, "Network"),
        ("cmdb_ci_ec2_instance", "ec2-web-01", "172.31.10.5", "Amazon Linux 2", "Public web front end", 3, "Platform Administrators"),
        ("cmdb_ci_appl", "SAP WEB03", "", "", "SAP web dispatcher", 2, "Software"),
        ("cmdb_ci_service", "Email", "", "", "Email for the whole company", 1, "Service Desk"),
        ("cmdb_ci_computer", "*JEMPLOYEE-LT", "10.0.5.23", "Windows 11", "Joe Employee's laptop", 1, "Hardware"),
    ]

    /// Relationships: parent, type, child (by item index).
    static let relations: [(Int, String, Int)] = [
        (7, "Runs on::Runs", 1), (8, "Depends on::Used by", 2), (1, "Depends on::Used by", 3),
        (4, "Connects to::Connected by", 5),
    ]

    /// Catalogs, their categories and items. An item: name, short description, price, variables (name, question,
    /// type).
    typealias Item = (name: String, description: String, price: String, variables: [(String, String, Int)])
    static let catalogs: [(title: String, description: String, categories: [(title: String, items: [Item])])] = [
        ("Service Catalog", "Order what you need for work: devices, software and services", [
            ("Hardware", [
                ("Apple iPad 3", "Apple iPad 3 with 64 GB", "499", [("color", "What color?", 5)]),
                ("Standard Laptop", "Lenovo ThinkPad T14, 16 GB", "1100", [
                    ("additional_software", "Additional software requirements", 2),
                ]),
            ]),
            ("Software", [
                ("Adobe Acrobat Pro", "Create and edit PDF documents", "450", []),
            ]),
            ("Services", [
                ("New Email Account", "A mailbox for a new colleague or a team", "0", [
                    ("new_email", "New email address", 6),
                ]),
                ("Password Reset", "Reset a forgotten password", "0", [("account", "Which account?", 6)]),
            ]),
        ]),
        ("Technical Catalog", "Infrastructure for engineering teams", [
            ("Infrastructure", [
                ("Provision a Linux VM", "A virtual machine with Red Hat Enterprise Linux", "0", [
                    ("cpus", "CPUs", 6), ("memory", "Memory (GB)", 6),
                ]),
                ("Firewall Rule Change", "Open or close a port between networks", "0", [
                    ("source", "Source network", 6), ("destination", "Destination", 6), ("port", "Port", 6),
                ]),
            ]),
        ]),
    ]

    static func seed(_ store: RecordStore, at: (Double, Double) -> String) async throws {
        let options = WriteOptions(suppressAutoSysFields: true)
        func insert(_ table: String, _ sysID: String, _ values: [String: String]) async throws {
            var values = values
            values["sys_id"] = sysID
            try await store.insert(into: table, values: values, caller: .system, options: options)
        }
        for (index, template) in templates.enumerated() {
            let producer = id("std_change_record_producer", index + 1)
            try await insert("std_change_record_producer", producer, [
                "name": template.name, "short_description": template.name, "category": template.category,
                "template": template.values.map { "\($0.0)=\($0.1)" }.joined(separator: "^"),
            ])
            try await insert("std_change_producer_version", id("std_change_producer_version", index + 1), [
                "name": "\(template.name) - 1", "version": "1", "std_change_producer": producer,
            ])
        }
        for (index, item) in items.enumerated() {
            let name = item.1.lowercased().replacingOccurrences(of: "*", with: "")
            var values = [
                "name": item.1, "short_description": item.4, "ip_address": item.2,
                "location": DemoData.id("location", item.5), "support_group": groupID(item.6),
                "install_status": "1", "operational_status": "1", "environment": "Production",
                "serial_number": "SN-\(1000 + index)", "asset_tag": "P\(10_000 + index)",
            ]
            if !item.2.isEmpty {
                values["fqdn"] = "\(name).example.com"
                values["host_name"] = name
                values["os"] = item.3
            }
            if item.0 == "cmdb_ci_ec2_instance" {
                values["vm_inst_id"] = "i-0abc\(index)def"
                values["state"] = "on"
                values["guest_os_fullname"] = item.3
            }
            try await insert(item.0, id("cmdb_ci", index + 1), values)
        }
        for (index, relation) in relations.enumerated() {
            try await insert("cmdb_rel_ci", id("cmdb_rel_ci", index + 1), [
                "parent": id("cmdb_ci", relation.0), "child": id("cmdb_ci", relation.2),
                "type": ITSMSchema.relationTypeID(relation.1),
            ])
        }
        var itemIndex = 0
        for (catalogIndex, catalog) in catalogs.enumerated() {
            let catalogID = catalogIndex == 0 ? "e0d08b13c3330100c8b837659bba8fb4" : id("sc_catalog", catalogIndex + 1)
            try await insert("sc_catalog", catalogID, ["title": catalog.title, "description": catalog.description])
            for (categoryIndex, category) in catalog.categories.enumerated() {
                let categoryID = id("sc_category.\(catalogIndex)", categoryIndex + 1)
                try await insert("sc_category", categoryID, [
                    "title": category.title, "description": "\(category.title) in the \(catalog.title)",
                    "sc_catalog": catalogID, "order": String(categoryIndex * 100),
                ])
                for (position, entry) in category.items.enumerated() {
                    itemIndex += 1
                    let itemID = id("sc_cat_item", itemIndex)
                    try await insert("sc_cat_item", itemID, [
                        "name": entry.name, "short_description": entry.description, "description": entry.description,
                        "price": entry.price, "category": categoryID, "sc_catalogs": catalogID,
                        "order": String(position * 100), "group": groupID(catalogIndex == 0 ? "Help Desk" : "Platform Administrators"),
                    ])
                    for (variableIndex, variable) in entry.variables.enumerated() {
                        try await insert("item_option_new", id("item_option_new.\(itemIndex)", variableIndex + 1), [
                            "cat_item": itemID, "name": variable.0, "question_text": variable.1,
                            "type": String(variable.2), "order": String((variableIndex + 1) * 100),
                        ])
                    }
                }
            }
        }
        // Changes: a standard one made from a template, a normal one with a task, an emergency one.
        try await insert("change_request", id("change_request", 1), [
            "type": "standard", "chg_model": "standard", "std_change_producer_version": id("std_change_producer_version", 1),
            "state": "-2", "assignment_group": groupID("Network"), "requested_by": DemoData.userID("beth.anglin"),
            "cmdb_ci": id("cmdb_ci", 5), "start_date": at(-2, 22), "end_date": at(-2, 23),
        ])
        try await insert("change_request", id("change_request", 2), [
            "type": "normal", "chg_model": "normal", "state": "-4", "short_description": "Upgrade the SAP database host memory",
            "description": "Add 128 GB to sap-db-01", "assignment_group": groupID("Database"), "risk": "2",
            "requested_by": DemoData.userID("don.goodliffe"), "cmdb_ci": id("cmdb_ci", 4), "category": "Hardware",
        ])
        try await insert("change_task", id("change_task", 1), [
            "change_request": id("change_request", 2), "change_task_type": "implementation",
            "short_description": "Install the memory modules", "description": "During the Saturday window",
            "assignment_group": groupID("Hardware"),
        ])
        try await insert("change_request", id("change_request", 3), [
            "type": "emergency", "chg_model": "emergency", "state": "-1",
            "short_description": "Patch the mail server against the disclosed vulnerability",
            "assignment_group": groupID("IT Securities"), "priority": "1", "risk": "2", "impact": "1",
            "cmdb_ci": id("cmdb_ci", 3), "category": "Software",
        ])
        for (index, category, subcategory) in [(1, "network", "wireless"), (3, "network", "vpn"), (4, "software", "email")] {
            try await store.update(
                DemoData.id("problem", index), in: "problem", values: ["category": category, "subcategory": subcategory],
                caller: .system, options: options
            )
        }
        try await insert("problem_task", id("problem_task", 1), [
            "problem": DemoData.id("problem", 1), "problem_task_type": "rca",
            "short_description": "Find the root cause", "assigned_to": DemoData.userID("problem.manager"),
            "assignment_group": groupID("Problem Solving"),
        ])
    }
}
