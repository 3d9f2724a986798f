import DocketModel
import Foundation

/// The demo instance: users, groups, roles, tasks with journals and knowledge articles, written through
/// the engine's normal write path. sys_ids are deterministic (`DemoData.id("incident", 1)`), so docs and
/// tests can name records; timestamps are relative to the moment of seeding.
enum DemoData {
    /// The sys_id of the n-th demo record of a kind (`user.john.doe`, `incident` 3 …).
    static func id(_ kind: String, _ index: Int) -> String { SysID.stable("demo.\(kind).\(index)") }
    static func userID(_ userName: String) -> String { SysID.stable("demo.user.\(userName)") }

    struct Person {
        var userName, first, last, title, department: String
        var password: String?
        var roles: [String]
        /// IANA time zone: display values of dates are shown in it.
        var timeZone = "UTC"
    }

    static let people: [Person] = [
        Person(userName: "admin", first: "System", last: "Administrator", title: "Administrator", department: "IT",
               password: "admin", roles: ["admin"]),
        Person(userName: "john.doe", first: "John", last: "Doe", title: "Service Desk Analyst", department: "IT",
               password: "password", roles: ["itil"]),
        Person(userName: "beth.anglin", first: "Beth", last: "Anglin", title: "Network Engineer", department: "IT",
               password: "password", roles: ["itil"], timeZone: "America/Los_Angeles"),
        Person(userName: "abel.tuter", first: "Abel", last: "Tuter", title: "Account Manager", department: "Sales",
               password: "password", roles: []),
        Person(userName: "fred.luddy", first: "Fred", last: "Luddy", title: "CFO", department: "Finance",
               password: nil, roles: []),
        Person(userName: "carol.coughlin", first: "Carol", last: "Coughlin", title: "HR Partner",
               department: "Human Resources", password: nil, roles: []),
    ]

    static let groups: [(name: String, description: String, manager: String, members: [String])] = [
        ("Service Desk", "First line support for all employees", "john.doe", ["john.doe", "beth.anglin"]),
        ("Network", "LAN, WAN, VPN and wireless", "beth.anglin", ["beth.anglin"]),
        ("Database", "Database administration", "admin", ["admin", "john.doe"]),
        ("Hardware", "Laptops, printers and peripherals", "john.doe", ["john.doe"]),
    ]

    /// The demo OAuth client's credentials.
    static let oauthClientID = "docket-demo"
    static let oauthClientSecret = "docket-demo-secret"

    static func seed(_ store: RecordStore) async throws {
        let now = Date()
        func at(daysAgo: Double, hour: Double = 9) -> String {
            GlideDateTime.format(now.addingTimeInterval(-daysAgo * 86_400 + hour * 3600))
        }
        let options = WriteOptions(suppressAutoSysFields: true)
        func insert(_ table: String, _ id: String, _ values: [String: String], created: String? = nil) async throws {
            var values = values
            values["sys_id"] = id
            if let created {
                values["sys_created_on"] = created
                values["sys_updated_on"] = created
                values["sys_created_by"] = values["sys_created_by"] ?? "admin"
                values["sys_updated_by"] = values["sys_created_by"]
            }
            try await store.insert(into: table, values: values, caller: .system, options: options)
        }

        // An OAuth client for /oauth_token.do (password and refresh_token grants).
        try await insert("oauth_entity", SysID.stable("demo.oauth_entity.1"), [
            "name": "Docket demo client", "client_id": oauthClientID, "client_secret": oauthClientSecret,
        ])

        for role in ["admin", "itil"] {
            try await insert("sys_user_role", SysID.stable("demo.role.\(role)"), [
                "name": role,
                "description": role == "admin" ? "Full access to everything" : "Fulfills tasks: incidents, problems, changes",
            ])
        }
        for person in people {
            var values = [
                "user_name": person.userName, "first_name": person.first, "last_name": person.last,
                "name": "\(person.first) \(person.last)", "title": person.title, "department": person.department,
                "email": "\(person.userName)@example.com", "time_zone": person.timeZone, "active": "true",
            ]
            if let password = person.password { values["password"] = password }
            try await insert("sys_user", userID(person.userName), values)
            for role in person.roles {
                try await insert("sys_user_has_role", SysID.stable("demo.has_role.\(person.userName).\(role)"), [
                    "user": userID(person.userName), "role": SysID.stable("demo.role.\(role)"),
                ])
            }
        }
        for (index, group) in groups.enumerated() {
            let groupID = id("group", index + 1)
            try await insert("sys_user_group", groupID, [
                "name": group.name, "description": group.description, "manager": userID(group.manager),
                "email": group.name.lowercased().replacingOccurrences(of: " ", with: ".") + "@example.com",
            ])
            for member in group.members {
                try await insert("sys_user_grmember", SysID.stable("demo.grmember.\(index).\(member)"), [
                    "user": userID(member), "group": groupID,
                ])
            }
        }
        try await seedTasks(insert: insert, at: at)
        try await seedKnowledge(insert: insert, at: at)
    }

    typealias Insert = (String, String, [String: String], String?) async throws -> Void

    // (short description, description, category, impact, urgency, state, assignee, group, caller, opened by)
    static let incidents: [(String, String, String, Int, Int, String, String?, Int, String, String)] = [
        ("Unable to connect to office wifi", "Laptop sees the network but authentication fails since this morning.", "network", 2, 2, "2", "john.doe", 1, "abel.tuter", "abel.tuter"),
        ("Email not syncing on phone", "Mail app on iPhone stopped syncing after the password change.", "software", 3, 2, "1", "john.doe", 1, "abel.tuter", "abel.tuter"),
        ("Printer on 3rd floor jams constantly", "HP LaserJet near the kitchen jams on every duplex job.", "hardware", 3, 3, "2", "john.doe", 4, "carol.coughlin", "john.doe"),
        ("VPN disconnects every 10 minutes", "Cisco AnyConnect drops the tunnel roughly every ten minutes from home.", "network", 2, 1, "2", "beth.anglin", 2, "fred.luddy", "fred.luddy"),
        ("Cannot open quarterly sales report", "Excel says the file is corrupted when opening Q3 report from SharePoint.", "software", 2, 2, "3", "john.doe", 1, "fred.luddy", "beth.anglin"),
        ("Laptop battery drains in one hour", "New laptop battery lasts about an hour even when idle.", "hardware", 3, 3, "1", "john.doe", 4, "carol.coughlin", "carol.coughlin"),
        ("Database backups failing nightly", "The nightly backup job of the ERP database fails with disk full.", "database", 1, 1, "2", "john.doe", 3, "fred.luddy", "admin"),
        ("Request for second monitor", "Need a second monitor for spreadsheet work.", "hardware", 3, 3, "1", nil, 4, "abel.tuter", "abel.tuter"),
        ("SAP login page times out", "The SAP portal login page spins and times out for the finance team.", "software", 1, 2, "2", "beth.anglin", 1, "fred.luddy", "fred.luddy"),
        ("Slow network in building B", "Everything on the network is slow in building B since Monday.", "network", 2, 2, "2", "beth.anglin", 2, "carol.coughlin", "beth.anglin"),
        ("Password reset for HR portal", "Locked out of the HR portal after too many attempts.", "inquiry", 3, 2, "6", "john.doe", 1, "carol.coughlin", "carol.coughlin"),
        ("Outlook crashes when opening calendar", "Outlook closes as soon as the calendar view is opened.", "software", 2, 3, "7", "john.doe", 1, "abel.tuter", "abel.tuter"),
        ("Keyboard keys sticking", "Several keys on the keyboard stick after a coffee spill.", "hardware", 3, 3, "7", "john.doe", 4, "abel.tuter", "abel.tuter"),
        ("Shared drive not mapped after login", "The S: drive does not map automatically after logging in.", "network", 3, 2, "2", "john.doe", 1, "carol.coughlin", "john.doe"),
        ("Error 500 on expense tool", "Submitting an expense report gives an internal server error.", "software", 2, 1, "1", "beth.anglin", 1, "fred.luddy", "fred.luddy"),
        ("Conference room projector no signal", "Projector in room Everest shows no signal from HDMI.", "hardware", 3, 2, "8", nil, 4, "carol.coughlin", "carol.coughlin"),
        ("Antivirus alert on workstation", "Endpoint protection flagged a suspicious download.", "software", 1, 2, "2", "john.doe", 1, "abel.tuter", "beth.anglin"),
        ("Cannot print to PDF", "Print to PDF option is missing from the print dialog.", "software", 3, 3, "6", "beth.anglin", 1, "abel.tuter", "abel.tuter"),
        ("Disk space low on file server", "File server FS02 is at 95% capacity.", "hardware", 2, 2, "2", "beth.anglin", 3, "fred.luddy", "admin"),
        ("New hire needs account setup", "Account, email and laptop for the new analyst starting Monday.", "inquiry", 3, 2, "1", "john.doe", 1, "carol.coughlin", "carol.coughlin"),
        ("Wireless keyboard not pairing", "Bluetooth keyboard will not pair with the docking station.", "hardware", 3, 3, "1", nil, 4, "fred.luddy", "fred.luddy"),
        ("CRM shows wrong customer totals", "Customer totals on the CRM dashboard do not match the invoices.", "database", 2, 2, "2", "beth.anglin", 3, "abel.tuter", "abel.tuter"),
    ]

    static func seedTasks(insert: Insert, at: (Double, Double) -> String) async throws {
        for (index, item) in incidents.enumerated() {
            let number = index + 1
            let opened = at(Double(40 - index), Double(index % 8))
            var values = [
                "short_description": item.0, "description": item.1, "category": item.2, "impact": String(item.3),
                "urgency": String(item.4), "state": item.5, "assignment_group": id("group", item.7),
                "caller_id": userID(item.8), "opened_by": userID(item.9), "opened_at": opened,
                "contact_type": ["phone", "email", "self-service"][index % 3], "sys_created_by": item.9,
            ]
            if let assignee = item.6 { values["assigned_to"] = userID(assignee) }
            try await insert("incident", id("incident", number), values, opened)
            try await insert("sys_journal_field", id("journal.incident.\(number)", 1), [
                "element_id": id("incident", number), "element": "comments", "name": "incident",
                "value": "Thanks for reporting this. We are looking into it.",
                "sys_created_by": item.6 ?? "admin",
            ], at(Double(39 - index), Double(index % 8)))
            if index % 2 == 0 {
                try await insert("sys_journal_field", id("journal.incident.\(number)", 2), [
                    "element_id": id("incident", number), "element": "work_notes", "name": "incident",
                    "value": "Checked logs; reproduced the issue on a test machine.",
                    "sys_created_by": item.6 ?? "admin",
                ], at(Double(38 - index), Double(index % 8)))
            }
        }
        let problems: [(String, String, String, String?)] = [
            ("Recurring wifi authentication failures", "Several users cannot authenticate to the corporate wifi after certificate rollover.", "102", "john.doe"),
            ("Nightly backup job unreliable", "Backups fail whenever the staging volume fills up.", "103", "john.doe"),
            ("VPN concentrator drops sessions", "Sessions drop under load on the primary VPN concentrator.", "104", "beth.anglin"),
            ("Outlook calendar corruption", "Calendar items corrupt the Outlook profile.", "106", "john.doe"),
            ("Printer fleet firmware bugs", "Duplex jams across the HP fleet point to a firmware defect.", "101", "john.doe"),
            ("SAP portal performance", "Login latency on the SAP portal during month end.", "102", "beth.anglin"),
            ("File server capacity planning", "File servers reach capacity every quarter.", "101", nil),
            ("Expense tool errors after upgrade", "Internal errors in the expense tool since the last upgrade.", "107", "beth.anglin"),
        ]
        for (index, item) in problems.enumerated() {
            let opened = at(Double(30 - index * 2), 10)
            var values = [
                "short_description": item.0, "description": item.1, "state": item.2, "impact": "2", "urgency": "2",
                "assignment_group": id("group", index % 2 == 0 ? 1 : 2), "opened_by": userID("admin"),
                "opened_at": opened, "sys_created_by": "admin",
            ]
            if let assignee = item.3 { values["assigned_to"] = userID(assignee) }
            try await insert("problem", id("problem", index + 1), values, opened)
            try await insert("sys_journal_field", id("journal.problem.\(index + 1)", 1), [
                "element_id": id("problem", index + 1), "element": "work_notes", "name": "problem",
                "value": "Linked related incidents and started root cause analysis.", "sys_created_by": item.3 ?? "admin",
            ], at(Double(29 - index * 2), 11))
        }
        let changes: [(String, String, String, String, String?)] = [
            ("Upgrade wifi controller firmware", "Apply vendor firmware 8.10 to both wifi controllers.", "normal", "-2", "john.doe"),
            ("Expand backup staging volume", "Grow the backup staging volume from 2 TB to 4 TB.", "standard", "-1", "john.doe"),
            ("Replace VPN concentrator", "Swap the primary VPN concentrator for the new appliance.", "normal", "-4", "beth.anglin"),
            ("Patch SAP portal", "Apply SAP security notes for the portal.", "emergency", "-5", "beth.anglin"),
            ("Retire old file server", "Migrate shares from FS01 and decommission it.", "normal", "3", "john.doe"),
        ]
        for (index, item) in changes.enumerated() {
            let opened = at(Double(20 - index * 3), 14)
            var values = [
                "short_description": item.0, "description": item.1, "type": item.2, "state": item.3,
                "impact": "2", "urgency": "3", "assignment_group": id("group", index % 2 == 0 ? 3 : 2),
                "opened_by": userID("beth.anglin"), "requested_by": userID("fred.luddy"), "opened_at": opened,
                "start_date": at(Double(-3 - index), 22), "end_date": at(Double(-3 - index), 23),
                "implementation_plan": "Follow the vendor runbook; verify service afterwards.",
                "backout_plan": "Restore the previous configuration from backup.", "sys_created_by": "beth.anglin",
            ]
            if let assignee = item.4 { values["assigned_to"] = userID(assignee) }
            try await insert("change_request", id("change_request", index + 1), values, opened)
        }
    }

    static func seedKnowledge(insert: Insert, at: (Double, Double) -> String) async throws {
        let articles: [(String, String, String)] = [
            ("How to connect to the corporate wifi", "Select CORP-WIFI, choose EAP-TLS and your user certificate.", "published"),
            ("Resetting your password", "Use the self-service portal and follow the link sent to your phone.", "published"),
            ("Setting up email on a phone", "Add an Exchange account with your email address and the autodiscover server.", "published"),
            ("Using the VPN from home", "Install AnyConnect, connect to vpn.example.com and approve the push.", "published"),
            ("Printing double-sided", "Pick the printer, open preferences and enable duplex printing.", "published"),
            ("Requesting new hardware", "Order laptops, monitors and peripherals from the service catalog.", "published"),
            ("Mapping network drives", "Run the drive mapping script from the start menu or reboot on the network.", "review"),
            ("Expense tool known issues", "Errors after the upgrade are tracked in a problem record.", "draft"),
            ("Backup policy", "Servers are backed up nightly; retention is 30 days.", "published"),
            ("Reporting a security incident", "Call the service desk immediately and do not power off the machine.", "retired"),
        ]
        for (index, article) in articles.enumerated() {
            let created = at(Double(60 - index * 3), 8)
            var values = [
                "short_description": article.0, "text": article.1, "workflow_state": article.2,
                "kb_category": ["Network", "Accounts", "Email", "Network", "Hardware"][index % 5],
                "author": userID(index % 2 == 0 ? "john.doe" : "beth.anglin"), "sys_created_by": "john.doe",
            ]
            if article.2 == "published" { values["published"] = created }
            try await insert("kb_knowledge", id("kb_knowledge", index + 1), values, created)
        }
    }
}
