import DocketModel
import Foundation

/// One task in the "My Work" list.
public struct MyTask: Sendable, Equatable {
    /// The task number (`INC0010001`).
    public var number: String
    /// The short description.
    public var shortDescription: String
    /// The record's sys_id.
    public var sysID: String
    /// The Table API URL of the record (`…/api/now/v2/table/incident/<sys_id>`).
    public var link: String
    /// When it was created (UTC `YYYY-MM-DD HH:MM:SS`).
    public var created: String

    public init(number: String, shortDescription: String, sysID: String, link: String, created: String) {
        self.number = number
        self.shortDescription = shortDescription
        self.sysID = sysID
        self.link = link
        self.created = created
    }

    /// The table of the record, from its link (`incident`).
    public var table: String? {
        let parts = link.split(separator: "/")
        return parts.count >= 2 ? String(parts[parts.count - 2]) : nil
    }
}

/// The caller's tasks of one type ("Incident", "Problem", …).
public struct TaskGroup: Sendable, Equatable {
    /// The type's label ("Incident", "Change Request").
    public var label: String
    /// The tasks, oldest first.
    public var tasks: [MyTask]

    public init(label: String, tasks: [MyTask]) {
        self.label = label
        self.tasks = tasks
    }
}

/// A journal entry (comment or work note).
public struct JournalEntry: Sendable, Equatable {
    /// `comments` or `work_notes`.
    public var element: String
    /// The text.
    public var value: String
    /// When it was written (UTC `YYYY-MM-DD HH:MM:SS`).
    public var createdOn: String
    /// Who wrote it (user name).
    public var createdBy: String
}

/// The "My Work" flow of ServiceNow's example apps: my tasks grouped by type, a task's detail and journal,
/// and adding a comment.
///
/// ```swift
/// for group in try await client.myWork.myTasks() {
///     print(group.label, group.tasks.map(\.number))
/// }
/// ```
public struct MyWorkService: Sendable {
    let session: DocketSession

    /// The caller's active tasks grouped by type, in the instance's order (oldest first within a group).
    /// Needs the My Work API (`x_snc_my_work`) on the instance.
    public func myTasks() async throws -> [TaskGroup] {
        let response = try await session.send("GET", "/api/x_snc_my_work/v1/tracker/task")
        guard let groups = try TableService.parse(response)["result"]?.objectValue else {
            throw DocketError(kind: .decoding, message: "unexpected response from the instance", detail: "no result object")
        }
        return groups.map { label, items in
            TaskGroup(
                label: label,
                tasks: (items.arrayValue ?? []).map { item in
                    MyTask(
                        number: item["number"]?.stringValue ?? "", shortDescription: item["short_desc"]?.stringValue ?? "",
                        sysID: item["sys_id"]?.stringValue ?? "", link: item["link"]?.stringValue ?? "",
                        created: item["created"]?.stringValue ?? ""
                    )
                }
            )
        }
    }

    /// A task's fields, read through the `task` table (any task type).
    public func task(_ sysID: String, displayValue: DisplayValue = .true) async throws -> TableRecord {
        try await TableService(session: session).record(sysID, in: "task", displayValue: displayValue)
    }

    /// Finds a task by number (`INC0010001`); nil when there is none.
    public func task(number: String, displayValue: DisplayValue = .true) async throws -> TableRecord? {
        try await TableService(session: session).records(
            in: "task", query: .where("number", .equals, number), limit: 1, displayValue: displayValue
        ).records.first
    }

    /// The task's journal entries, newest first.
    public func comments(for sysID: String, limit: Int? = nil) async throws -> [JournalEntry] {
        let page = try await TableService(session: session).records(
            in: "sys_journal_field",
            query: .where("element_id", .equals, sysID).orderBy("sys_created_on", descending: true),
            fields: ["element", "value", "sys_created_on", "sys_created_by"], limit: limit
        )
        return page.records.map {
            JournalEntry(
                element: $0["element"] ?? "", value: $0["value"] ?? "", createdOn: $0["sys_created_on"] ?? "",
                createdBy: $0["sys_created_by"] ?? ""
            )
        }
    }

    /// Adds a customer-visible comment (the `comments` journal) to a task, through the Table API.
    public func addCustomerComment(_ text: String, to sysID: String) async throws {
        _ = try await TableService(session: session).updateRecord(sysID, in: "task", with: ["comments": text])
    }

    /// Adds a comment through the My Work API, which stores it as a work note (visible to fulfillers only), as
    /// an instance's My Work API does.
    public func addComment(_ text: String, to sysID: String) async throws {
        let body = try JSONEncoder().encode(["comment": text])
        _ = try await session.send(
            "POST", "/api/x_snc_my_work/v1/tracker/task/\(Instance.encode(sysID))/comment", body: body
        )
    }
}
