import DocketModel

/// The tables, fields and choice lists a new instance starts with. They are written into `sys_db_object`,
/// `sys_dictionary`, `sys_choice` and `sys_number` once, when the data folder is created; from then on the
/// catalog is loaded from those tables.
enum BaseSchema {
    static let tables: [TableDefinition] = [
        table("sys_db_object", "Table", display: "label", [
            string("name", "Name", 80), string("label", "Label", 80),
            ref("super_class", "Extends table", "sys_db_object"), bool("is_extendable", "Extensible"),
        ], indexes: [["name"]]),
        table("sys_dictionary", "Dictionary Entry", display: "column_label", [
            string("name", "Table", 80), string("element", "Column name", 80),
            string("column_label", "Column label", 80), string("internal_type", "Type", 40),
            string("reference", "Reference", 80), int("max_length", "Max length"),
            bool("mandatory", "Mandatory"), bool("read_only", "Read only"), bool("active", "Active", "true"),
            bool("display", "Display"), string("default_value", "Default value", 512),
        ], indexes: [["name"]]),
        table("sys_choice", "Choices", display: "label", [
            string("name", "Table", 80), string("element", "Element", 80), string("value", "Value", 40),
            string("label", "Label", 100), int("sequence", "Sequence"), bool("inactive", "Inactive"),
            string("language", "Language", 40, defaultValue: "en"),
        ], indexes: [["name", "element"]]),
        table("sys_number", "Number", display: "prefix", [
            string("category", "Table", 80), string("prefix", "Prefix", 40), int("number", "Number"),
            int("maximum_digits", "Number of digits", "7"),
        ]),
        table("sys_user", "User", display: "name", [
            string("user_name", "User ID", 40), string("first_name", "First name", 50),
            string("last_name", "Last name", 50), string("name", "Name", 151), string("email", "Email", 100),
            string("title", "Title", 60), string("phone", "Business phone", 40),
            string("mobile_phone", "Mobile phone", 40), ref("manager", "Manager", "sys_user"),
            ref("department", "Department", "cmn_department"), ref("location", "Location", "cmn_location"),
            bool("active", "Active", "true"), bool("locked_out", "Locked out"),
            bool("web_service_access_only", "Web service access only"), bool("vip", "VIP"),
            string("time_zone", "Time zone", 40), string("employee_number", "Employee number", 40),
            glideDateTime("last_login_time", "Last login time"),
            // A bcrypt hash, read back as "********"; `password` is accepted as its name in writes.
            FieldDefinition(table: "", name: "user_password", label: "Password", type: .password, maxLength: 255),
        ], indexes: [["user_name"]]),
        table("sys_user_group", "Group", display: "name", [
            string("name", "Name", 80), string("description", "Description", 1000),
            ref("manager", "Manager", "sys_user"), string("email", "Group email", 100),
            bool("active", "Active", "true"), ref("parent", "Parent", "sys_user_group"),
        ]),
        table("sys_user_grmember", "Group Member", display: nil, [
            ref("user", "User", "sys_user"), ref("group", "Group", "sys_user_group"),
        ], indexes: [["user"], ["group"]]),
        table("sys_user_role", "Role", display: "name", [
            string("name", "Name", 100), string("description", "Description", 1000),
        ]),
        table("sys_group_has_role", "Group Role", display: nil, [
            ref("group", "Group", "sys_user_group"), ref("role", "Role", "sys_user_role"),
            bool("inherits", "Inherits", "true"),
        ], indexes: [["group"]]),
        table("cmn_department", "Department", display: "name", [
            string("name", "Name", 100), string("id", "ID", 40), string("description", "Description", 1000),
            ref("dept_head", "Department head", "sys_user"), ref("parent", "Parent", "cmn_department"),
            string("business_unit", "Business unit", 100), string("cost_center", "Cost center", 100),
        ]),
        table("cmn_location", "Location", display: "name", [
            string("name", "Name", 100), string("street", "Street", 255), string("city", "City", 100),
            string("state", "State / Province", 100), string("zip", "Zip / Postal code", 40),
            string("country", "Country", 40), ref("parent", "Parent", "cmn_location"),
            string("latitude", "Latitude", 40), string("longitude", "Longitude", 40),
        ]),
        // System properties (`glide.sys.default.tz`: the time zone of users who have none).
        table("sys_properties", "System Property", display: "name", [
            string("name", "Name", 100), string("value", "Value", 4000), string("type", "Type", 40, defaultValue: "string"),
            string("description", "Description", 1000),
        ], indexes: [["name"]]),
        // Business rules as data (``BusinessRules``): on a table, before an insert, update or delete, for records
        // matching `filter_condition`, set field values (`template`) or abort the write with `message`. Their
        // scripts are stored and never run.
        table("sys_script", "Business Rule", display: "name", [
            string("name", "Name", 100), string("collection", "Table", 80), bool("active", "Active", "true"),
            string("when", "When", 40, defaultValue: "before"), int("order", "Order", "100"),
            bool("action_insert", "Insert"), bool("action_update", "Update"), bool("action_delete", "Delete"),
            bool("action_query", "Query"), string("filter_condition", "Filter conditions", 4000),
            string("template", "Set field values", 4000), bool("abort_action", "Abort action"),
            bool("add_message", "Add message"), string("message", "Message", 4000),
            string("condition", "Condition", 254), string("script", "Script", 100_000), bool("advanced", "Advanced"),
            string("description", "Description", 4000),
        ], indexes: [["collection"]]),
        // Tables of a developer instance that clients look up by name (their records are not served yet).
        table("alm_asset", "Asset", display: "display_name", [
            string("display_name", "Display name", 255), string("asset_tag", "Asset tag", 40),
            string("serial_number", "Serial number", 100), ref("assigned_to", "Assigned to", "sys_user"),
            int("install_status", "State", "1"),
        ]),
        table("bsm_chart", "Chart", display: "name", [
            string("name", "Name", 100), string("title", "Title", 100), string("table", "Table", 80),
        ]),
        // The system log: what the server did (logins, schema changes, errors), newest last.
        table("syslog", "System Log", display: "message", [
            int("level", "Level", "0"), string("source", "Source", 100), string("message", "Message", 4000),
        ], indexes: [["source"]]),
        // Application files: one row per table definition, dictionary entry and other configuration record.
        table("sys_metadata", "Application File", display: "sys_name", [
            string("sys_name", "Display name", 255), string("sys_update_name", "Update name", 255),
            string("sys_package", "Package", 100), string("sys_scope", "Application", 100),
            string("sys_policy", "Protection policy", 40),
        ], indexes: [["sys_update_name"]]),
        table("sys_user_has_role", "User Role", display: nil, [
            ref("user", "User", "sys_user"), ref("role", "Role", "sys_user_role"),
            bool("inherited", "Inherited"), string("state", "State", 40, defaultValue: "active"),
        ], indexes: [["user"]]),
        table("sys_journal_field", "Journal Entry", display: nil, [
            string("element_id", "Element ID", 32), string("element", "Element", 80),
            string("name", "Name", 80), string("value", "Value", 1_000_000),
        ], indexes: [["element_id"]]),
        TableDefinition(
            name: "task", label: "Task", parent: nil, isExtendable: true, numberPrefix: "TASK", numberStart: 1001,
            ownFields: taskFields, indexes: [["number"], ["assigned_to"], ["opened_by"]]
        ),
        TableDefinition(
            name: "incident", label: "Incident", parent: "task", isExtendable: true, numberPrefix: "INC",
            numberStart: 10001,
            ownFields: [
                ref("caller_id", "Caller", "sys_user"), string("category", "Category", 40, defaultValue: "inquiry"),
                string("subcategory", "Subcategory", 40), int("incident_state", "Incident state", "1"),
                int("hold_reason", "On hold reason"), string("close_code", "Resolution code", 40),
                glideDateTime("resolved_at", "Resolved"), ref("resolved_by", "Resolved by", "sys_user"),
                ref("problem_id", "Problem", "problem"), int("severity", "Severity", "3"),
                int("reopen_count", "Reopen count", "0"), ref("parent_incident", "Parent Incident", "incident"),
            ].map { inTable("incident", $0) }, indexes: [["caller_id"]]
        ),
        TableDefinition(
            name: "problem", label: "Problem", parent: "task", isExtendable: true, numberPrefix: "PRB",
            numberStart: 40001,
            ownFields: [
                bool("known_error", "Known error"), string("cause_notes", "Cause notes", 4000),
                string("fix_notes", "Fix notes", 4000), string("workaround", "Workaround", 4000),
                string("resolution_code", "Resolution code", 40), ref("duplicate_of", "Duplicate of", "problem"),
                int("related_incidents", "Related incidents", "0"),
            ].map { inTable("problem", $0) } + ITSMSchema.problemFields
        ),
        TableDefinition(
            name: "change_request", label: "Change Request", parent: "task", isExtendable: true, numberPrefix: "CHG",
            numberStart: 30001,
            ownFields: [
                string("type", "Type", 40, defaultValue: "normal"), int("risk", "Risk", "3"),
                glideDateTime("start_date", "Planned start date"), glideDateTime("end_date", "Planned end date"),
                string("implementation_plan", "Implementation plan", 4000),
                string("backout_plan", "Backout plan", 4000), string("test_plan", "Test plan", 4000),
                ref("requested_by", "Requested by", "sys_user"), bool("cab_required", "CAB required"),
                bool("on_hold", "On hold"),
            ].map { inTable("change_request", $0) } + ITSMSchema.changeRequestFields
        ),
        table("kb_knowledge", "Knowledge", display: "number", prefix: "KB", start: 10001, [
            string("number", "Number", 40), string("short_description", "Short description", 160),
            string("text", "Article body", 65_000), string("workflow_state", "Workflow", 40, defaultValue: "draft"),
            string("kb_category", "Category", 80), ref("author", "Author", "sys_user"),
            glideDateTime("published", "Published"), int("sys_view_count", "View count", "0"),
            bool("active", "Active", "true"),
        ]),
        // The DataSync showcase's tasks (served as `Task` at /graphql; `version` is sys_mod_count + 1).
        table("datasync_task", "DataSync Task", display: "title", [
            string("title", "Title", 255), string("description", "Description", 4000),
            string("status", "Status", 20, defaultValue: "OPEN"),
        ]),
        // OAuth clients (ServiceNow's Application Registry). The secret is a password field: stored as a bcrypt
        // hash, never returned.
        table("oauth_entity", "Application Registry", display: "name", [
            string("name", "Name", 100), string("client_id", "Client ID", 100),
            FieldDefinition(table: "", name: "client_secret", label: "Client secret", type: .password, maxLength: 255),
            int("access_token_lifespan", "Access Token Lifespan", "1800"),
            int("refresh_token_lifespan", "Refresh Token Lifespan", "8640000"),
            bool("active", "Active", "true"), string("redirect_url", "Redirect URL", 4000),
            // OpenID Connect: a public client (an app that cannot keep a secret: PKCE instead), the grants it may
            // use (comma-separated; empty: password and refresh_token, as ServiceNow's clients), and where
            // RP-initiated logout may return to. Redirect URLs are comma- or space-separated.
            bool("public_client", "Public client"), string("grant_types", "Grant types", 255),
            string("post_logout_redirect_url", "Post-logout redirect URL", 4000),
            // The user a client_credentials grant acts as (with `client_credentials` among its grant types).
            ref("user", "OAuth Application User", "sys_user"),
        ], indexes: [["client_id"]]),
        // REST API keys (`x-sn-apikey`): each stands for its user; only the SHA-256 of the key is kept (made and
        // shown once by `docketd users api-key`).
        table("api_key", "REST API Key", display: "name", [
            string("name", "Name", 100), ref("user", "User", "sys_user"), bool("active", "Active", "true"),
            glideDateTime("expires", "Expires"), string("description", "Description", 1000),
            FieldDefinition(table: "", name: "token_hash", label: "Key hash", type: .string, maxLength: 64, readOnly: true),
        ], indexes: [["token_hash"]]),
        // Client certificates that sign in (with `--tls-client-ca`): each, by the SHA-256 of its DER form, stands for
        // its user (registered by `docketd users certificate`).
        table("sys_user_certificate", "User Certificate", display: "subject", [
            ref("user", "User", "sys_user"), string("subject", "Subject", 1000), bool("active", "Active", "true"),
            glideDateTime("expires", "Expires"),
            FieldDefinition(table: "", name: "fingerprint", label: "SHA-256 fingerprint", type: .string, maxLength: 64, readOnly: true),
        ], indexes: [["fingerprint"]]),
        // Issued OAuth tokens, by the SHA-256 of the token (the token itself is never stored).
        table("oauth_credential", "OAuth Credential", display: nil, [
            string("token", "Token hash", 64), string("type", "Type", 40), ref("user", "User", "sys_user"),
            ref("client", "Client", "oauth_entity"), glideDateTime("expires", "Expires"),
            string("refresh", "Refresh token hash", 64),
        ], indexes: [["token"], ["user"]]),
        // Attachment metadata; the bytes live in docket_attachment_chunk.
        table("sys_attachment", "Attachment", display: "file_name", [
            string("file_name", "File name", 100), string("content_type", "Content type", 100),
            int("size_bytes", "Size bytes"), int("size_compressed", "Size compressed"),
            bool("compressed", "Compressed"), string("table_name", "Table name", 80),
            string("table_sys_id", "Table sys ID", 32), string("hash", "Hash", 64),
            string("image_width", "Image width", 40), string("image_height", "Image height", 40),
            string("average_image_color", "Average image color", 40), string("sys_tags", "Tags", 255),
        ], indexes: [["table_sys_id"]]),
        // REST rate limits (ServiceNow's sys_rate_limit_rules): requests per hour for all users, users with a
        // role, or one user, on one API (`resource`) or all of them (empty).
        table("sys_rate_limit_rules", "Rate Limit Rule", display: "name", [
            string("name", "Name", 100), string("resource", "REST API", 40),
            string("type", "Applies to", 40, defaultValue: "all_users"), ref("user", "User", "sys_user"),
            string("role", "Role", 100), int("rate_limit", "Requests per hour", "1000"),
            bool("active", "Active", "true"),
        ]),
        // Long Table API queries kept under a token (`POST /api/now/tinyurl`, then `?sysparm_tiny=<token>`).
        table("sys_tiny_url", "Tiny URL", display: "tiny_url", [
            string("tiny_url", "Tiny URL", 40), string("data", "Data", 65_000), ref("user", "User", "sys_user"),
        ], indexes: [["tiny_url"]]),
        // Saved queries (Compass's query definitions): a name, a folder (personal or public), the owner, the record
        // type and the definition as the dialect keeps it; `number` is the numeric id clients address it by.
        table("sys_saved_query", "Saved Query", display: "name", prefix: "", start: 16_777_301, [
            string("number", "Number", 40), string("name", "Name", 254), string("folder", "Folder", 40, defaultValue: "personal"),
            ref("user", "Owner", "sys_user", defaultValue: "javascript:gs.getUserID()"), string("record_type", "Record type", 80),
            string("definition", "Definition", 65_000),
        ], indexes: [["user"], ["number"]]),
        // A user's settings by name, as ServiceNow keeps them; the web UI keeps each user's list of a table
        // (`docket.list.TABLE`: its filter, columns, sort and grouping) here.
        table("sys_user_preference", "User Preference", display: "name", [
            ref("user", "User", "sys_user", defaultValue: "javascript:gs.getUserID()"), string("name", "Name", 100),
            string("value", "Value", 4000), string("description", "Description", 255),
        ], indexes: [["user", "name"]]),
    ] + ITSMSchema.tables + WorkflowSchema.tables + ContextSchema.tables + NotificationSchema.tables

    static let taskFields: [FieldDefinition] = [
        FieldDefinition(table: "task", name: "number", label: "Number", type: .string, maxLength: 40, isDisplay: true),
        string("short_description", "Short description", 160), string("description", "Description", 4000),
        int("state", "State", "1"), bool("active", "Active", "true"), int("priority", "Priority", "4"),
        int("impact", "Impact", "3"), int("urgency", "Urgency", "3"),
        ref("assigned_to", "Assigned to", "sys_user"), ref("assignment_group", "Assignment group", "sys_user_group"),
        glideDateTime("opened_at", "Opened", "javascript:gs.nowDateTime()"),
        ref("opened_by", "Opened by", "sys_user", defaultValue: "javascript:gs.getUserID()"),
        glideDateTime("closed_at", "Closed"), ref("closed_by", "Closed by", "sys_user"),
        string("close_notes", "Close notes", 4000), glideDateTime("due_date", "Due date"),
        ref("parent", "Parent", "task"), int("escalation", "Escalation", "0"),
        int("reassignment_count", "Reassignment count", "0"),
        string("contact_type", "Contact type", 40), string("watch_list", "Watch list", 4000),
        FieldDefinition(table: "task", name: "comments", label: "Additional comments", type: .journal),
        FieldDefinition(table: "task", name: "work_notes", label: "Work notes", type: .journal),
        // Both journals interleaved, newest first; read only (writes to it are ignored).
        FieldDefinition(
            table: "task", name: JournalStreams.combined, label: "Comments and Work notes", type: .journal, readOnly: true
        ),
    ].map { inTable("task", $0) } + ITSMSchema.taskFields

    /// Choice lists: (table, field) → (value, label) in display order.
    static let choices: [(String, String, [(String, String)])] = [
        ("task", "state", [("-5", "Pending"), ("1", "Open"), ("2", "Work in Progress"), ("3", "Closed Complete"),
                           ("4", "Closed Incomplete"), ("7", "Closed Skipped")]),
        ("task", "priority", [("1", "1 - Critical"), ("2", "2 - High"), ("3", "3 - Moderate"), ("4", "4 - Low"),
                              ("5", "5 - Planning")]),
        ("task", "impact", [("1", "1 - High"), ("2", "2 - Medium"), ("3", "3 - Low")]),
        ("task", "urgency", [("1", "1 - High"), ("2", "2 - Medium"), ("3", "3 - Low")]),
        ("task", "escalation", [("0", "Normal"), ("1", "Moderate"), ("2", "High"), ("3", "Overdue")]),
        ("task", "contact_type", [("email", "Email"), ("phone", "Phone"), ("self-service", "Self-service"),
                                  ("walk-in", "Walk-in")]),
        ("incident", "state", [("1", "New"), ("2", "In Progress"), ("3", "On Hold"), ("6", "Resolved"),
                               ("7", "Closed"), ("8", "Canceled")]),
        ("incident", "incident_state", [("1", "New"), ("2", "In Progress"), ("3", "On Hold"), ("6", "Resolved"),
                                        ("7", "Closed"), ("8", "Canceled")]),
        ("incident", "hold_reason", [("1", "Awaiting Caller"), ("3", "Awaiting Problem"), ("4", "Awaiting Vendor"),
                                     ("5", "Awaiting Change")]),
        ("incident", "category", [("inquiry", "Inquiry / Help"), ("software", "Software"), ("hardware", "Hardware"),
                                  ("network", "Network"), ("database", "Database")]),
        ("incident", "severity", [("1", "1 - High"), ("2", "2 - Medium"), ("3", "3 - Low")]),
        ("incident", "close_code", ["Duplicate", "Known error", "Resolved by caller", "Resolved by change",
                                    "Resolved by problem", "Solution provided", "Workaround provided", "User error"]
            .map { ($0, $0) }),
        ("problem", "state", [("101", "New"), ("102", "Assess"), ("103", "Root Cause Analysis"),
                              ("104", "Fix in Progress"), ("106", "Resolved"), ("107", "Closed")]),
        ("change_request", "state", [("-5", "New"), ("-4", "Assess"), ("-3", "Authorize"), ("-2", "Scheduled"),
                                     ("-1", "Implement"), ("0", "Review"), ("3", "Closed"), ("4", "Canceled")]),
        ("change_request", "type", [("standard", "Standard"), ("normal", "Normal"), ("emergency", "Emergency")]),
        ("change_request", "risk", [("1", "Very High"), ("2", "High"), ("3", "Moderate"), ("4", "Low")]),
        ("sys_rate_limit_rules", "type", [("all_users", "All users"), ("role", "Role"), ("user", "Single user")]),
        ("sys_rate_limit_rules", "resource", [("", "All REST APIs"), ("table", "Table API"),
                                              ("attachment", "Attachment API"), ("stats", "Aggregate API"),
                                              ("batch", "Batch API"), ("my_work", "My Work API")]),
        ("syslog", "level", [("-1", "Debug"), ("0", "Information"), ("1", "Warning"), ("2", "Error")]),
        ("sys_script", "when", [("before", "before"), ("after", "after"), ("async", "async"), ("display", "display")]),
        ("datasync_task", "status", [("OPEN", "Open"), ("ASSIGNED", "Assigned"), ("COMPLETE", "Complete")]),
        ("kb_knowledge", "workflow_state", [("draft", "Draft"), ("review", "Review"), ("published", "Published"),
                                            ("retired", "Retired")]),
    ] + ITSMSchema.choices + WorkflowSchema.choices + NotificationSchema.choices

    /// Default `state` of new records per table (the field default is on `task`).
    static let initialStates: [String: String] = ["incident": "1", "problem": "101", "change_request": "-5"]
        .merging(ITSMSchema.initialStates) { old, _ in old }

    // MARK: Builders

    static func table(
        _ name: String, _ label: String, display: String?, prefix: String? = nil, start: Int = 10001,
        _ fields: [FieldDefinition], indexes: [[String]] = []
    ) -> TableDefinition {
        TableDefinition(
            name: name, label: label, parent: nil, isExtendable: false, numberPrefix: prefix, numberStart: start,
            ownFields: fields.map { field in
                field.copy(table: name, isDisplay: field.name == display)
            },
            indexes: indexes
        )
    }

    static func inTable(_ table: String, _ field: FieldDefinition) -> FieldDefinition {
        field.copy(table: table)
    }

    static func string(_ name: String, _ label: String, _ length: Int, defaultValue: String? = nil)
        -> FieldDefinition
    {
        FieldDefinition(table: "", name: name, label: label, type: .string, maxLength: length, defaultValue: defaultValue)
    }

    static func int(_ name: String, _ label: String, _ defaultValue: String? = nil) -> FieldDefinition {
        FieldDefinition(table: "", name: name, label: label, type: .integer, maxLength: 40, defaultValue: defaultValue)
    }

    static func bool(_ name: String, _ label: String, _ defaultValue: String = "false") -> FieldDefinition {
        FieldDefinition(table: "", name: name, label: label, type: .boolean, maxLength: 40, defaultValue: defaultValue)
    }

    static func glideDateTime(_ name: String, _ label: String, _ defaultValue: String? = nil)
        -> FieldDefinition
    {
        FieldDefinition(table: "", name: name, label: label, type: .glideDateTime, maxLength: 40, defaultValue: defaultValue)
    }

    static func ref(_ name: String, _ label: String, _ target: String, defaultValue: String? = nil)
        -> FieldDefinition
    {
        FieldDefinition(
            table: "", name: name, label: label, type: .reference, reference: target, maxLength: 32,
            defaultValue: defaultValue
        )
    }
}
