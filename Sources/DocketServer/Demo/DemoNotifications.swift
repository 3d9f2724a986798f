import DocketModel

/// The demo's notification rules, the seeds' behaviour: the Compass app's "a defect was assigned to you" and "a
/// defect you own was changed" (with what changed), "a new comment on your item", and the DataSync showcase's
/// "new task" for every DataSync user (a group).
enum DemoNotifications {
    static let dataSyncGroupID = SysID.stable("demo.group.datasync")
    static func ruleID(_ name: String) -> String { SysID.stable("demo.notification.\(name)") }

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
        let rules: [(key: String, values: [String: String])] = [
            ("assigned", [
                "name": "Assigned to you", "collection": "task", "action_insert": "true", "action_update": "true",
                "changed_fields": "assigned_to", "recipient_fields": "assigned_to", "weight": "20",
                "subject": "${number} was assigned to you", "message_text": "${short_description}",
            ]),
            ("comment", [
                "name": "New comment on your item", "collection": "task", "action_update": "true", "changed_fields": "comments",
                "recipient_fields": "assigned_to,opened_by,caller_id,watch_list", "weight": "15",
                "subject": "${changed_by} commented on ${number}", "message_text": "${comments}",
            ]),
            ("changed", [
                "name": "Your item was changed", "collection": "task", "action_update": "true", "recipient_fields": "assigned_to",
                "weight": "10", "subject": "${number} was changed by ${changed_by}", "message_text": "${changes}",
            ]),
            ("datasync-task", [
                "name": "New task", "collection": "datasync_task", "action_insert": "true", "recipient_groups": dataSyncGroupID,
                "subject": "New task: ${title}", "message_text": "${description}",
            ]),
        ]
        for rule in rules {
            var values = rule.values
            values["sys_id"] = ruleID(rule.key)
            try await store.insert(into: "sysevent_email_action", values: values, caller: .system)
        }
    }
}
