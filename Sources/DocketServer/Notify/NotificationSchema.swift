import DocketModel

/// The tables of notifications. Rules, the notifications each user received and the devices they receive them on
/// are catalog tables (the Table API reads them, access rules guard them, and a notification's insert is an event
/// like any other, so a user's open pages learn of it live on every instance). What only the notifier needs — its
/// place in the event log and its lease, and one delivery record per notification and device — are side tables.
enum NotificationSchema {
    typealias S = BaseSchema

    /// Rules (ServiceNow's `sysevent_email_action`, "Notification"): on which table, on insert and/or update, under
    /// which condition (an encoded query on the record after the change), whom (user fields of the record, users,
    /// groups), with which subject and text (`${field}` placeholders). `changed_fields` (Docket's): the update must
    /// change one of these fields. `weight` as on ServiceNow: of the rules an event triggers for one recipient, only
    /// those with the highest weight send; weight 0 always sends.
    static let rules = S.table("sysevent_email_action", "Notification", display: "name", [
        S.string("name", "Name", 100),
        FieldDefinition(table: "", name: "collection", label: "Table", type: .tableName, maxLength: 80),
        S.bool("action_insert", "Inserted"), S.bool("action_update", "Updated"),
        S.string("condition", "Conditions", 4000), S.string("changed_fields", "When these fields change", 1000),
        S.string("recipient_fields", "Users/Groups in fields", 1000),
        FieldDefinition(table: "", name: "recipient_users", label: "Users", type: .glideList, reference: "sys_user", maxLength: 4000),
        FieldDefinition(
            table: "", name: "recipient_groups", label: "Groups", type: .glideList, reference: "sys_user_group", maxLength: 4000
        ),
        S.string("subject", "Subject", 255), S.string("message_text", "Message", 4000), S.int("weight", "Weight", "0"),
        S.bool("active", "Active", "true"),
    ])

    /// The rules every instance starts with, as ServiceNow ships default notifications: assigned to me, assigned to
    /// my group (while nobody in it has it), a comment on something I opened or am assigned, and its state changing.
    /// Each tells only the people the change concerns and never the one who made it; an administrator edits or
    /// deactivates them like any rule (the web UI's item page of the rule, or the Table API).
    static let defaultRules: [(key: String, values: [(String, SQLValue)])] = [
        ("assigned", [
            ("name", .text("Assigned to you")), ("collection", .text("task")), ("action_insert", .integer(1)), ("action_update", .integer(1)),
            ("changed_fields", .text("assigned_to")), ("recipient_fields", .text("assigned_to")), ("weight", .integer(20)),
            ("subject", .text("${number} was assigned to you")), ("message_text", .text("${short_description}")),
        ]),
        ("group", [
            ("name", .text("Assigned to your group")), ("collection", .text("task")), ("action_insert", .integer(1)), ("action_update", .integer(1)),
            ("condition", .text("assigned_toISEMPTY")), ("changed_fields", .text("assignment_group")), ("recipient_fields", .text("assignment_group")),
            ("weight", .integer(18)), ("subject", .text("${number} was assigned to ${assignment_group}")), ("message_text", .text("${short_description}")),
        ]),
        ("comment", [
            ("name", .text("New comment on your item")), ("collection", .text("task")), ("action_update", .integer(1)), ("changed_fields", .text("comments")),
            ("recipient_fields", .text("assigned_to,opened_by,caller_id,watch_list")), ("weight", .integer(15)),
            ("subject", .text("${changed_by} commented on ${number}")), ("message_text", .text("${comments}")),
        ]),
        ("state", [
            ("name", .text("State of your item changed")), ("collection", .text("task")), ("action_update", .integer(1)), ("changed_fields", .text("state")),
            ("recipient_fields", .text("assigned_to,opened_by,caller_id")), ("weight", .integer(12)),
            ("subject", .text("${number} is now ${state}")), ("message_text", .text("${short_description}\n${changes}")),
        ]),
    ]

    /// The sys_id of a default rule.
    static func defaultRuleID(_ key: String) -> String { SysID.stable("default.notification.\(key)") }

    /// Adds ``defaultRules`` to a new database (``SchemaStore/prepare(_:now:)``) that has no rule yet. An upgraded
    /// database gets none: an administrator who has no rules may mean it.
    static func addDefaultRules(_ db: SQLExecutor, now: String) async throws {
        guard try await db.rows("SELECT sys_id FROM sysevent_email_action LIMIT 1").isEmpty else { return }
        for rule in defaultRules {
            try await SchemaStore.insertMetadataRow(
                "sysevent_email_action", [("active", .integer(1))] + rule.values, id: defaultRuleID(rule.key), db: db, now: now
            )
        }
    }

    /// What a user was told: one row per notification and recipient, written by the notifier.
    static let inbox = S.table("sys_notification", "Notification message", display: "subject", [
        S.ref("user", "User", "sys_user"), S.ref("notification", "Notification", "sysevent_email_action"),
        FieldDefinition(table: "", name: "table_name", label: "Table", type: .tableName, maxLength: 80),
        S.string("document", "Document", 32), S.int("event", "Event"), S.string("subject", "Subject", 255),
        S.string("message", "Message", 4000), S.bool("read", "Read"),
    ], indexes: [["user"]])

    /// A device or browser a user receives pushes on: a Web Push or UnifiedPush subscription (endpoint and keys),
    /// or an APNs device token.
    static let subscriptions = S.table("sys_push_subscription", "Push subscription", display: "name", [
        S.ref("user", "User", "sys_user", defaultValue: "javascript:gs.getUserID()"),
        S.string("kind", "Kind", 40, defaultValue: "webpush"), S.string("name", "Device", 100),
        S.string("endpoint", "Endpoint", 1000), S.string("p256dh", "Public key", 200), S.string("auth", "Authentication secret", 100),
        S.string("token", "Device token", 200), S.bool("active", "Active", "true"),
        S.glideDateTime("last_delivery", "Last delivery"), S.int("failures", "Failures in a row", "0"),
        // Registered through AeroGear's device API (``UPSController``): the variant, and the installation's details.
        S.ref("variant", "Variant", "sys_push_variant"), S.string("alias", "Alias", 255), S.string("categories", "Categories", 1000),
        S.string("device_type", "Device type", 100), S.string("operating_system", "Operating system", 100),
        S.string("os_version", "OS version", 100),
    ], indexes: [["user"], ["token"]])

    /// AeroGear UnifiedPush's push applications: a name, the id and master secret (hashed) that the sender API
    /// takes (`POST /rest/sender`).
    static let applications = S.table("sys_push_application", "Push application", display: "name", [
        S.string("name", "Name", 100), S.string("push_application_id", "Push application ID", 40),
        FieldDefinition(table: "", name: "master_secret", label: "Master secret", type: .password, maxLength: 255),
    ], indexes: [["push_application_id"]])

    /// Its variants, one per platform (`ios`, `android`, `web_push`): the id and secret an app registers its device
    /// with (`POST /rest/registry/device`). The variant secret ships inside every copy of the app, as AeroGear's does
    /// (`mobile-services.json` carries it): it names the app, it protects nothing. `client_id` ties the variant to the
    /// OpenID client whose `mobile-services.json` lists it.
    static let variants = S.table("sys_push_variant", "Push variant", display: "name", [
        S.string("name", "Name", 100), S.ref("push_application", "Push application", "sys_push_application"),
        S.string("platform", "Platform", 40), S.string("variant_id", "Variant ID", 40), S.string("variant_secret", "Variant secret", 100),
        S.string("client_id", "Client ID", 100), S.bool("active", "Active", "true"),
    ], indexes: [["variant_id"]])

    /// What a user chose not to receive: a rule altogether (no device named), or a rule on one device.
    static let preferences = S.table("sys_notification_preference", "Notification preference", display: "notification", [
        S.ref("user", "User", "sys_user", defaultValue: "javascript:gs.getUserID()"),
        S.ref("notification", "Notification", "sysevent_email_action"), S.ref("subscription", "Device", "sys_push_subscription"),
        S.bool("enabled", "Send", "true"),
    ], indexes: [["user"]])

    static let tables: [TableDefinition] = [rules, inbox, subscriptions, preferences, applications, variants]

    static let choices: [(String, String, [(String, String)])] = [
        ("sys_push_subscription", "kind", [
            ("webpush", "Web Push"), ("unifiedpush", "UnifiedPush"), ("apns", "Apple Push"), ("fcm", "Firebase Cloud Messaging"),
        ]),
        ("sys_push_variant", "platform", [("ios", "iOS"), ("android", "Android"), ("web_push", "Web Push")]),
    ]

    /// Who may do what: everyone reads the rules (to choose what reaches them); each user reads their own
    /// notifications and marks them read, and registers, renames and removes their own devices.
    static let access: [AccessRule] = {
        let own = try! EncodedQuery("user=javascript:gs.getUserID()")
        return [
            AccessRule("sysevent_email_action", [.read]),
            AccessRule("sys_notification", [.read], condition: .query(own)),
            AccessRule("sys_notification", [.write], condition: .query(own), writableFields: ["read"]),
            AccessRule("sys_push_subscription", [.read, .create, .delete], condition: .query(own)),
            AccessRule("sys_push_subscription", [.write], condition: .query(own), writableFields: ["name", "active"]),
            AccessRule("sys_notification_preference", [.read, .create, .write, .delete], condition: .query(own)),
        ]
    }()

    /// The notifier's place in the event log and its lease (one row per worker), and one delivery record per
    /// notification and device: what was sent, what waits for a retry, what a push service refused.
    static func createSideTables(_ db: SQLExecutor) async throws {
        let integer = SQLFragment(db.dialect.integerType)
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_worker (name TEXT PRIMARY KEY NOT NULL, position " + integer + " NOT NULL, holder TEXT NOT NULL,"
                + " lease_until " + integer + " NOT NULL)"
        )
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_push_delivery (notification TEXT NOT NULL, subscription TEXT NOT NULL, user_id TEXT NOT NULL,"
                + " state TEXT NOT NULL, attempts " + integer + " NOT NULL, next_attempt " + integer + " NOT NULL, last_status "
                + integer + " NOT NULL, created " + integer + " NOT NULL, PRIMARY KEY (notification, subscription))"
        )
        try await db.run("CREATE INDEX IF NOT EXISTS ix_docket_push_delivery_due ON docket_push_delivery (state, next_attempt)")
    }
}
