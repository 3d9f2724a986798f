import DocketModel

/// The demo's notification rules beside the default ones, the seeds' behaviour: the Compass app's "a defect you own
/// was changed" (with what changed; "assigned to you" and "a new comment on your item" are default rules), and the
/// DataSync showcase's "new task" for every DataSync user (a group).
enum DemoNotifications {
    static let dataSyncGroupID = SysID.stable("demo.group.datasync")
    /// A rule's sys_id: the default rules every instance has (``NotificationSchema/defaultRules``), then the demo's own.
    static func ruleID(_ name: String) -> String {
        NotificationSchema.defaultRules.contains { $0.key == name }
            ? NotificationSchema.defaultRuleID(name) : SysID.stable("demo.notification.\(name)")
    }
    static let pushApplicationID = SysID.stable("demo.push.application")
    static let pushApplicationKey = "5f3e2b6c-9a41-4c9e-8a51-7d2f0c1b9e11"
    static let pushMasterSecret = "docket-demo-master-secret"
    /// (platform, variant id, variant secret).
    static let variants = [
        ("ios", "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d", "ios-variant-secret-3f1c"),
        ("android", "1c2d3e4f-5061-4b7c-9d8e-0f1a2b3c4d5e", "android-variant-secret-7a2d"),
        ("web_push", "2d3e4f50-6172-4c8d-8e9f-1a2b3c4d5e6f", "web-variant-secret-9b4e"),
    ]

    static func seed(_ store: RecordStore) async throws {
        try await store.insert(into: "sys_user_group", values: [
            "sys_id": dataSyncGroupID, "name": "DataSync users", "description": "Everyone who uses the DataSync task list",
            "manager": DemoData.userID("admin"), "email": "datasync.users@example.com",
        ], caller: .system)
        for member in ["admin", "john.doe", "beth.anglin", "abel.tuter"] {
            try await store.insert(into: "sys_user_grmember", values: [
                "sys_id": SysID.stable("demo.grmember.datasync.\(member)"), "user": DemoData.userID(member), "group": dataSyncGroupID,
            ], caller: .system)
        }
        // Besides the default rules (assigned to you, to your group, a comment, a state change):
        let rules: [(key: String, values: [String: String])] = [
            ("changed", [
                "name": "Your item was changed", "collection": "task", "action_update": "true", "recipient_fields": "assigned_to",
                "weight": "10", "subject": "${number} was changed by ${changed_by}", "message_text": "${changes}",
            ]),
            ("datasync-task", [
                "name": "New task", "collection": "datasync_task", "action_insert": "true", "recipient_groups": dataSyncGroupID,
                "subject": "New task: ${title}", "message_text": "${description}",
            ]),
        ]
        // The DataSync showcase's push application, with a variant per platform for its public client (the ids
        // and secrets its mobile-services.json carries) and a master secret for the sender API.
        try await store.insert(into: "sys_push_application", values: [
            "sys_id": pushApplicationID, "name": "DataSync showcase", "push_application_id": pushApplicationKey,
            "master_secret": pushMasterSecret,
        ], caller: .system)
        for (platform, key, secret) in variants {
            try await store.insert(into: "sys_push_variant", values: [
                "sys_id": SysID.stable("demo.push.variant.\(platform)"), "name": "DataSync showcase (\(platform))",
                "push_application": pushApplicationID, "platform": platform, "variant_id": key, "variant_secret": secret,
                "client_id": "datasync-starter-client",
            ], caller: .system)
        }
        for rule in rules {
            var values = rule.values
            values["sys_id"] = ruleID(rule.key)
            try await store.insert(into: "sysevent_email_action", values: values, caller: .system)
        }
    }
}
