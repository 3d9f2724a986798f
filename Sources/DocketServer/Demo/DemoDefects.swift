import DocketModel
import Foundation

/// The demo's Compass side: repository `SampleRepository`, database `SAMPL`, with projects and defects of the demo
/// users in every state. Each defect is submitted and moved through its actions by the people involved, so
/// its history (`sys_wf_history`) is what running those actions writes, dated over the last weeks.
enum DemoDefects {
    static let projects: [(String, String)] = [
        ("Docket Mobile", "The iOS and Android apps"), ("Docket Server", "docketd and its APIs"),
        ("Intranet", "The company intranet and its single sign-on"),
    ]

    struct Defect {
        var headline: String
        var description: String
        var severity: String
        var priority: String
        var submitter: String
        var project: Int
        /// Actions after the submit: (action, by, values).
        var actions: [(String, String, [String: String])]
        var keywords = ""
    }

    static let defects: [Defect] = [
        Defect(headline: "Login fails after changing the password", description: "The app keeps the old password and locks the account.",
               severity: "2", priority: "2", submitter: "beth.anglin", project: 1,
               actions: [("Assign", "beth.anglin", ["assigned_to": "john.doe"]), ("Open", "john.doe", [:])], keywords: "Security"),
        Defect(headline: "Defect list does not refresh on pull", description: "Pull to refresh spins but shows the old list.",
               severity: "3", priority: "3", submitter: "abel.tuter", project: 1,
               actions: [("Assign", "beth.anglin", ["assigned_to": "john.doe"])], keywords: "UI"),
        Defect(headline: "Attachment upload times out over 10 MB", description: "Uploads of large screenshots fail after 30 seconds.",
               severity: "3", priority: "3", submitter: "john.doe", project: 2, actions: []),
        Defect(headline: "Dates shown in UTC instead of local time", description: "Submit dates ignore the user's time zone.",
               severity: "4", priority: "3", submitter: "beth.anglin", project: 2,
               actions: [("Assign", "beth.anglin", ["assigned_to": "john.doe"]), ("Open", "john.doe", [:]),
                         ("Resolve", "john.doe", ["resolution": "Fixed"])]),
        Defect(headline: "Crash when opening a defect without a project", description: "The detail screen crashes on an empty project.",
               severity: "1", priority: "1", submitter: "john.doe", project: 1,
               actions: [("Assign", "john.doe", ["assigned_to": "beth.anglin"]), ("Open", "beth.anglin", [:]),
                         ("Resolve", "beth.anglin", ["resolution": "Fixed"]), ("Close", "john.doe", [:])], keywords: "Crash"),
        Defect(headline: "Login rejects the new password", description: "Looks like the first defect again.",
               severity: "2", priority: "2", submitter: "abel.tuter", project: 1,
               actions: [("Duplicate", "john.doe", ["duplicate_of": "#1"])]),
        Defect(headline: "Dark mode colours on the settings screen", description: "Labels are hard to read in dark mode.",
               severity: "5", priority: "4", submitter: "john.doe", project: 1,
               actions: [("Assign", "john.doe", ["assigned_to": "beth.anglin"]), ("Postpone", "beth.anglin", [:])], keywords: "UI"),
        Defect(headline: "Search ignores the second word", description: "Searching 'vpn drops' finds every VPN defect.",
               severity: "3", priority: "2", submitter: "john.doe", project: 3,
               actions: [("Assign", "john.doe", ["assigned_to": "beth.anglin"]), ("Open", "beth.anglin", [:])]),
        Defect(headline: "Intranet sign-on loops between two pages", description: "Happens only with two tabs open.",
               severity: "2", priority: "2", submitter: "abel.tuter", project: 3,
               actions: [("Assign", "beth.anglin", ["assigned_to": "beth.anglin"]), ("Open", "beth.anglin", [:]),
                         ("Resolve", "beth.anglin", ["resolution": "Not Reproducible"])]),
        Defect(headline: "Export to CSV drops the last row", description: "A result set of 20 rows exports 19.",
               severity: "3", priority: "3", submitter: "beth.anglin", project: 2, actions: []),
        Defect(headline: "Choice list of Severity is unsorted", description: "Severity values appear in random order.",
               severity: "4", priority: "4", submitter: "beth.anglin", project: 2,
               actions: [("Assign", "beth.anglin", ["assigned_to": "john.doe"]),
                         ("Modify", "beth.anglin", ["priority": "2", "description": "Severity values appear in random order; seen on iOS 17 and 18."])]),
    ]

    static func projectID(_ index: Int) -> String { DemoData.id("project", index) }

    static func seed(_ store: RecordStore, now: Date) async throws {
        let options = WriteOptions(suppressAutoSysFields: true)
        for (index, project) in projects.enumerated() {
            try await store.insert(
                into: "project", values: ["sys_id": projectID(index + 1), "name": project.0, "description": project.1],
                caller: .system
            )
        }
        var ids: [String] = []
        for (index, defect) in defects.enumerated() {
            // Each defect is submitted some weeks ago; its actions follow a day or two apart.
            var time = now.addingTimeInterval(-Double(30 - index * 2) * 86_400 + Double(index % 5) * 3_600)
            func stamp() -> String { GlideDateTime.format(time) }
            let id = DemoData.id("defect", index + 1)
            ids.append(id)
            try await store.insert(
                into: "defect",
                values: [
                    "sys_id": id, "short_description": defect.headline, "description": defect.description,
                    "severity": defect.severity, "priority": defect.priority, "project": projectID(defect.project),
                    "keywords": defect.keywords, "opened_at": stamp(), "sys_created_on": stamp(), "sys_updated_on": stamp(),
                    "sys_created_by": defect.submitter, "sys_updated_by": defect.submitter,
                ],
                caller: seeder(defect.submitter), options: options
            )
            for (action, user, values) in defect.actions {
                time += Double(20 + index % 7) * 3_600
                var values = values.mapValues { value -> String in
                    value.hasPrefix("#") ? DemoData.id("defect", Int(value.dropFirst()) ?? 1) : value
                }
                if let owner = values["assigned_to"] { values["assigned_to"] = DemoData.userID(owner) }
                values["sys_updated_on"] = stamp()
                values["sys_updated_by"] = user
                var acting = options
                acting.action = action
                try await store.update(id, in: "defect", values: values, caller: seeder(user), options: acting)
            }
        }
    }

    /// A demo user as the seed acts for them: with their name (so history and Submitter are theirs) and allowed to
    /// keep the dates the seed gives.
    static func seeder(_ userName: String) -> Caller {
        Caller(userID: DemoData.userID(userName), userName: userName, displayName: userName, roles: ["admin"])
    }
}
