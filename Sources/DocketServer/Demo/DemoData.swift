import DocketModel
import Foundation

/// The demo instance: users, groups, roles, tasks with journals and knowledge articles, written through
/// the engine's normal write path. sys_ids are deterministic (`DemoData.id("incident", 1)`), so docs and
/// tests can name records; timestamps are relative to the moment of seeding.
enum DemoData {
    /// The sys_id of the n-th demo record of a kind (`user.john.doe`, `incident` 3 …).
    static func id(_ kind: String, _ index: Int) -> String { SysID.stable("demo.\(kind).\(index)") }
    /// A demo user's sys_id; `admin` has the one every instance gives it, which scripts rely on.
    static func userID(_ userName: String) -> String {
        wellKnownUserIDs[userName] ?? SysID.stable("demo.user.\(userName)")
    }
    static let adminUserID = "6816f79cc0a8016401c5a33be04be441"
    /// Users a developer instance has under these sys_ids (ServiceNow's own client tests name them).
    static let wellKnownUserIDs = [
        "admin": adminUserID, "problem.admin": "26fbff173b331300ad3cc9bb34efc4bd",
        "natasha.ingram": "46c5bf6ca9fe1981010713e3ac7d3384",
    ]
    /// A role's sys_id: `admin` and `itil` have their well-known ones.
    static func roleID(_ name: String) -> String {
        switch name {
        case "admin": return "2831a114c611228501d4ea6c309d626d"
        case "itil": return "282bf1fac6112285017366cb5f867469"
        default: return SysID.stable("demo.role.\(name)")
        }
    }

    struct Person {
        var userName, first, last, title, department: String
        var password: String?
        var roles: [String]
        /// IANA time zone: display values of dates are shown in it; empty for the instance's default
        /// (`glide.sys.default.tz`).
        var timeZone = "UTC"
    }

    static let people: [Person] = [
        // As on a developer instance: in Finance, with no time zone of his own.
        Person(userName: "admin", first: "System", last: "Administrator", title: "Administrator", department: "Finance",
               password: "admin", roles: ["admin"], timeZone: ""),
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
    ] + staff

    /// More of the company, none of whom can log in (no password); eleven users in all hold `admin`, as on a
    /// developer instance.
    static let staff: [Person] = [
        ("david.miller", "David", "Miller", "Systems Administrator", "IT", ["admin"]),
        ("luke.wilson", "Luke", "Wilson", "Platform Engineer", "Development", ["admin"]),
        ("bud.richman", "Bud", "Richman", "Security Engineer", "IT", ["admin"]),
        ("don.goodliffe", "Don", "Goodliffe", "Database Administrator", "IT", ["admin", "itil"]),
        ("christen.mitchell", "Christen", "Mitchell", "Service Owner", "Customer Support", ["itil"]),
        ("ron.kettering", "Ron", "Kettering", "Developer", "Development", ["admin"]),
        ("sam.sorokin", "Sam", "Sorokin", "Release Manager", "Development", ["admin"]),
        ("jimmie.barninger", "Jimmie", "Barninger", "Support Engineer", "Customer Support", ["itil"]),
        ("bow.ruggeri", "Bow", "Ruggeri", "Network Administrator", "IT", ["admin", "itil"]),
        ("lucius.bagnoli", "Lucius", "Bagnoli", "Product Manager", "Product Management", ["admin"]),
        ("alissa.mountjoy", "Alissa", "Mountjoy", "Recruiter", "Human Resources", []),
        ("survey.user", "Survey", "User", "Survey Administrator", "Product Management", ["admin"]),
        ("itil.user", "ITIL", "User", "Fulfiller", "Customer Support", ["itil"]),
        ("ethan.hunt", "Ethan", "Hunt", "Field Technician", "IT", ["admin"]),
        ("vera.jones", "Vera", "Jones", "Controller", "Finance", []),
        ("natasha.ingram", "Natasha", "Ingram", "Finance Director", "Finance", []),
        ("problem.admin", "Problem", "Administrator", "Problem Manager", "IT", ["itil"]),
        // Users a developer instance has that automation (Ansible's servicenow.itsm) names.
        ("employee", "Joe", "Employee", "Employee", "Sales", []),
        ("problem.manager", "Problem", "Manager", "Problem Manager", "IT", ["itil"]),
        ("abraham.lincoln", "Abraham", "Lincoln", "Chief Executive", "Finance", []),
        ("change.manager", "Change", "Manager", "Change Manager", "IT", ["itil"]),
    ].map { Person(userName: $0.0, first: $0.1, last: $0.2, title: $0.3, department: $0.4, password: nil, roles: $0.5) }

    /// Departments: name → (cost center, head).
    static let departments: [(name: String, costCenter: String, head: String)] = [
        ("IT", "IT Operations", "david.miller"), ("Sales", "Sales and Marketing", "abel.tuter"),
        ("Finance", "Finance", "natasha.ingram"), ("Human Resources", "Human Resources", "carol.coughlin"),
        ("Development", "Engineering", "luke.wilson"), ("Customer Support", "Customer Care", "christen.mitchell"),
        ("Product Management", "Engineering", "lucius.bagnoli"),
    ]

    static let locations: [(name: String, street: String, city: String, state: String, zip: String, country: String)] = [
        ("San Diego", "3033 Science Park Road", "San Diego", "CA", "92121", "USA"),
        ("Santa Clara", "2225 Lawson Lane", "Santa Clara", "CA", "95054", "USA"),
        ("London", "1 Fleet Place", "London", "", "EC4M 7WS", "UK"),
        ("Amsterdam", "Vijzelstraat 68", "Amsterdam", "", "1017 HL", "Netherlands"),
        ("Hyderabad", "Hitec City", "Hyderabad", "Telangana", "500081", "India"),
    ]

    static func departmentID(_ name: String) -> String {
        // Finance has the sys_id of a developer instance's Finance department.
        name == "Finance" ? "a581ab703710200044e0bfc8bcbe5de8" : SysID.stable("demo.department.\(name)")
    }

    /// The instance's default time zone (`glide.sys.default.tz`), a developer instance's.
    static let defaultTimeZone = "America/Los_Angeles"

    /// Groups; the first four take the demo's tasks. `roles` are what members inherit (`sys_group_has_role`).
    static let groups: [(name: String, description: String, manager: String, members: [String], roles: [String])] = [
        ("Service Desk", "First line support for all employees", "john.doe", ["john.doe", "beth.anglin"], ["itil"]),
        ("Network", "LAN, WAN, VPN and wireless", "beth.anglin", ["beth.anglin"], ["itil"]),
        ("Database", "Database administration", "admin", ["admin", "john.doe"], ["itil", "admin"]),
        ("Hardware", "Laptops, printers and peripherals", "john.doe", ["john.doe"], ["itil"]),
        ("Platform Administrators", "Instance configuration and upgrades", "david.miller", ["david.miller", "luke.wilson"], ["admin"]),
        ("Identity and Access", "Accounts, roles and single sign-on", "bud.richman", ["bud.richman"], ["user_admin"]),
        ("Knowledge Managers", "Owns the knowledge base", "christen.mitchell", ["christen.mitchell"], ["knowledge_admin"]),
        ("Change Advisory Board", "Reviews and approves normal changes", "sam.sorokin", ["sam.sorokin", "don.goodliffe"], []),
        // More of a developer instance's groups (names its automation looks up).
        ("Software", "Application support", "luke.wilson", ["luke.wilson", "ron.kettering"], ["itil"]),
        ("Help Desk", "Walk-up and phone support", "jimmie.barninger", ["jimmie.barninger", "itil.user"], ["itil"]),
        ("IT Securities", "Security operations", "bud.richman", ["bud.richman"], ["itil"]),
        ("IT Securities CAB", "Approves security changes", "bud.richman", ["bud.richman"], []),
        ("IT Finance CAB", "Approves changes to finance systems", "natasha.ingram", ["natasha.ingram"], []),
        ("Network CAB Managers", "Approves network changes", "bow.ruggeri", ["bow.ruggeri"], []),
        ("Openspace", "Facilities and office space", "christen.mitchell", ["christen.mitchell"], []),
        ("Problem Solving", "Root cause analysis", "problem.manager", ["problem.manager", "problem.admin"], ["itil"]),
        ("LDAP Admins", "Directory services", "david.miller", ["david.miller"], ["itil"]),
    ]

    /// Roles: name → description.
    static let roles: [(String, String)] = [
        ("admin", "Full access to everything"), ("itil", "Fulfills tasks: incidents, problems, changes"),
        ("user_admin", "Manages users, groups and roles"), ("knowledge_admin", "Manages knowledge bases and articles"),
        ("snc_basic_auth_api_access", "Grants access to REST APIs with basic authentication"),
        ("catalog_admin", "Manages the service catalog"),
    ]

    /// The demo OAuth client's credentials.
    static let oauthClientID = "docket-demo"
    static let oauthClientSecret = "docket-demo-secret"

    /// Whether a database holds the demo data (its john.doe, whose sys_id no real user has).
    static func isPresent(in store: RecordStore) async throws -> Bool {
        try await store.storage.read { db in
            try await !db.rows("SELECT sys_id FROM sys_user WHERE sys_id = " + .bind(userID("john.doe"))).isEmpty
        }
    }

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

        try await store.update(
            SysID.stable("sys_properties:glide.sys.default.tz"), in: "sys_properties", values: ["value": defaultTimeZone],
            caller: .system
        )
        // An OAuth client for /oauth_token.do: password and refresh_token grants, and client_credentials acting as
        // itil.user (its OAuth Application User, set below), as automation uses it.
        try await insert("oauth_entity", SysID.stable("demo.oauth_entity.1"), [
            "name": "Docket demo client", "client_id": oauthClientID, "client_secret": oauthClientSecret,
            "grant_types": "password,refresh_token,client_credentials",
        ])
        // OpenID Connect clients: the DataSync showcase's public client (as its Keycloak realm registers it: any
        // localhost address, the browser flow and direct grants), and a phone app's (its own URL scheme, PKCE).
        try await insert("oauth_entity", SysID.stable("demo.oauth_entity.datasync"), [
            "name": "DataSync starter", "client_id": "datasync-starter-client", "public_client": "true",
            "grant_types": "authorization_code,refresh_token,password",
            "redirect_url": "http://localhost*,http://127.0.0.1*", "post_logout_redirect_url": "http://localhost*,http://127.0.0.1*",
        ])
        try await insert("oauth_entity", SysID.stable("demo.oauth_entity.mobile"), [
            "name": "Docket mobile app", "client_id": "docket-mobile", "public_client": "true",
            "grant_types": "authorization_code,refresh_token", "redirect_url": "com.docket.app:/oauth2redirect",
            "post_logout_redirect_url": "com.docket.app:/oauth2redirect",
        ])

        for (role, description) in roles {
            try await insert("sys_user_role", roleID(role), ["name": role, "description": description])
        }
        for (index, location) in locations.enumerated() {
            try await insert("cmn_location", id("location", index + 1), [
                "name": location.name, "street": location.street, "city": location.city, "state": location.state,
                "zip": location.zip, "country": location.country,
            ])
        }
        for department in departments {
            try await insert("cmn_department", departmentID(department.name), [
                "name": department.name, "cost_center": department.costCenter, "business_unit": department.costCenter,
                "id": String(department.name.prefix(3)).uppercased(),
            ])
        }
        for (index, person) in people.enumerated() {
            var values = [
                "user_name": person.userName, "first_name": person.first, "last_name": person.last,
                "name": "\(person.first) \(person.last)", "title": person.title,
                "department": departmentID(person.department), "location": id("location", index % locations.count + 1),
                "email": "\(person.userName)@example.com", "time_zone": person.timeZone, "active": "true",
            ]
            if let password = person.password { values["user_password"] = password }
            try await insert("sys_user", userID(person.userName), values)
            for role in person.roles {
                try await insert("sys_user_has_role", SysID.stable("demo.has_role.\(person.userName).\(role)"), [
                    "user": userID(person.userName), "role": roleID(role),
                ])
            }
        }
        // The demo client's secret is published: its client_credentials grant acts as a fulfiller, not as admin.
        try await store.update(
            SysID.stable("demo.oauth_entity.1"), in: "oauth_entity", values: ["user": userID("itil.user")], caller: .system
        )
        for department in departments {
            try await store.update(
                departmentID(department.name), in: "cmn_department", values: ["dept_head": userID(department.head)],
                caller: .system
            )
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
            for role in group.roles {
                try await insert("sys_group_has_role", SysID.stable("demo.group_has_role.\(index).\(role)"), [
                    "group": groupID, "role": roleID(role),
                ])
            }
        }
        try await seedTasks(insert: insert, at: at)
        try await seedKnowledge(insert: insert, at: at)
        // The DataSync showcase's shared task list (/graphql).
        for (index, task) in [
            ("Order office supplies", "Printer paper and toner for the second floor", "OPEN"),
            ("Book the training room", "Thursday afternoon, for the onboarding session", "ASSIGNED"),
            ("Renew the SSL certificate", "The intranet certificate expires next month", "COMPLETE"),
        ].enumerated() {
            try await insert(
                "datasync_task", id("datasync_task", index + 1),
                ["title": task.0, "description": task.1, "status": task.2, "sys_created_by": "john.doe"],
                created: at(daysAgo: Double(10 - index), hour: 9)
            )
        }
        try await DemoDefects.seed(store, now: now)
        try await DemoContexts.seed(store)
        try await DemoNotifications.seed(store)
        try await DemoITSM.seed(store, at: at)
        try await seedSystemLog(store, now: now)
    }

    /// Hundreds of system log entries over the last weeks, as an instance accumulates them. Written in bulk,
    /// as the server writes its log: log rows are not changes anybody subscribes to.
    static func seedSystemLog(_ store: RecordStore, now: Date, count: Int = 750) async throws {
        let sources = [
            ("Authentication", 0, ["User john.doe logged in", "User beth.anglin logged in", "User admin logged in",
                                   "Failed login for user abel.tuter", "Session expired for user fred.luddy"]),
            ("Scheduler", 0, ["Job 'Clean expired sessions' completed", "Job 'Compact event log' completed",
                              "Job 'SLA timers' completed in 42 ms"]),
            ("REST API", 0, ["GET /api/now/table/incident answered 200", "POST /api/now/table/incident answered 201",
                             "PATCH /api/now/table/problem answered 200"]),
            ("Email", 1, ["Outbound mail server slow to answer", "Mail to carol.coughlin@example.com deferred"]),
            ("Database", 2, ["Statement took longer than 5 seconds on task", "Deadlock retried on sys_user"]),
            ("Evaluator", 1, ["Script include 'TaskUtils' used a deprecated API"]),
        ]
        var rows: [[(String, SQLValue)]] = []
        rows.reserveCapacity(count)
        for index in 0..<count {
            let (source, level, messages) = sources[index % sources.count]
            let created = GlideDateTime.format(now.addingTimeInterval(-Double(count - index) * 2_400))
            rows.append([
                ("sys_id", .text(id("syslog", index + 1))), ("level", .integer(level)), ("source", .text(source)),
                ("message", .text(messages[(index / sources.count) % messages.count])),
                ("sys_created_on", .text(created)), ("sys_created_by", .text("system")),
                ("sys_updated_on", .text(created)), ("sys_updated_by", .text("system")), ("sys_mod_count", .integer(0)),
            ])
        }
        let chunks = rows.chunked(200)
        try await store.storage.write { db in
            for chunk in chunks {
                let columns = chunk[chunk.startIndex].map { SQLFragment.identifier($0.0) }.joined(", ")
                let values = chunk.map { "(" + $0.map(\.1.fragment).joined(", ") + ")" }.joined(", ")
                try await db.run("INSERT INTO syslog (" + columns + ") VALUES " + values)
            }
        }
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
