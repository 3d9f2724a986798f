import ArgumentParser
import DocketKit
import DocketModel
import Foundation

struct TasksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tasks", abstract: "List your active tasks, grouped by type (needs the My Work API)."
    )

    @OptionGroup var connection: ConnectionOptions

    @OptionGroup var output: OutputOptions

    @Flag(help: "Keep the list current: after each change to your tasks, say what changed and show the list again (Ctrl-C stops).")
    var watch = false

    @OptionGroup var offline: OfflineOptions

    func run() async throws {
        let client = try connection.serviceNowClient("tasks")
        let environment = CLIEnvironment.current
        let groups: [TaskGroup]
        do {
            groups = try await client.myWork.myTasks()
        } catch where !offline.online && !watch && OfflineCopy.isUnreachable(error) {
            return try await renderOffline(client, because: error)
        }
        render(groups)
        if !offline.online { await keepCopy(groups, client: client) }
        guard watch else { return }
        // The My Work list: active tasks assigned to me. A task that leaves it (reassigned, closed) is told too.
        var since: Int? = nil
        while true {
            do {
                var iterator = client.liveUpdates(
                    table: "task", query: "assigned_to=javascript:gs.getUserID()^active=true", since: since
                ).makeAsyncIterator()
                while let change = try await iterator.next() {
                    since = change.sequence
                    if !output.json { environment.print("\n" + Self.describe(change)) }
                    render(try await client.myWork.myTasks())
                }
                return
            } catch let error as DocketError where error.kind == .resyncNeeded {
                environment.err("docket: \(error.message); showing the list again\n")
                since = nil
                render(try await client.myWork.myTasks())
            }
        }
    }

    /// What a change did to my list, in words.
    static func describe(_ change: RecordChange) -> String {
        let name = change["number"].isEmpty ? change.sysID : change["number"]
        let what: String
        switch change.kind {
        case .entered: what = change.operation == "insert" ? "was created for you" : "was assigned to you"
        case .changed:
            let fields = change.fields.filter { !$0.hasPrefix("sys_") }
            what = "was changed" + (fields.isEmpty ? "" : " (" + fields.prefix(4).joined(separator: ", ") + ")")
        case .left: what = change["active"] == "false" ? "left your list (closed)" : "left your list"
        case .deleted: what = "was deleted"
        }
        return "\(name) \(what) by \(change.user)"
    }

    /// Keeps the listed tasks in the offline copy, to show them when the instance cannot be reached.
    private func keepCopy(_ groups: [TaskGroup], client: DocketClient) async {
        let ids = groups.flatMap { $0.tasks.map(\.sysID) }
        do {
            let store = try OfflineCopy.open(client)
            if !ids.isEmpty { try await store.refresh("task", query: .where("sys_id", .in, ids.joined(separator: ",")), limit: ids.count, remember: false) }
            try await store.saveList("my_work", table: "task", ids: ids)
            // The choice lists of the listed classes (read once a day): states and labels offline.
            let classes = Set(try await store.list("my_work")?.records.compactMap { $0.values["sys_class_name"] } ?? [])
            for recordClass in classes.sorted() where !recordClass.isEmpty { try await store.keepChoices(of: recordClass) }
        } catch {
            CLIEnvironment.current.err("docket: warning: the offline copy could not be updated (\(error))\n")
        }
    }

    /// The list from the offline copy, saying so and how old it is.
    private func renderOffline(_ client: DocketClient, because error: any Error) async throws {
        guard let store = try OfflineCopy.existing(client), let (records, asOf) = try await store.list("my_work") else {
            throw CLIFailure("\(error) and there is no offline copy of your tasks yet (run 'docket tasks' once while online)")
        }
        CLIEnvironment.current.err("docket: cannot reach the instance; your tasks from the offline copy, \(OfflineCopy.age(asOf))\n")
        var groups: [(label: String, tasks: [MyTask])] = []
        for record in records where record.values["active"] != "false" {
            let label = Self.label(of: record.values["sys_class_name"] ?? record.table)
            let task = MyTask(
                number: record.values["number"] ?? record.sysID, shortDescription: record.values["short_description"] ?? "",
                sysID: record.sysID, link: "", created: record.values["sys_created_on"] ?? ""
            )
            if let index = groups.firstIndex(where: { $0.label == label }) { groups[index].tasks.append(task) } else { groups.append((label, [task])) }
        }
        render(groups.map { TaskGroup(label: $0.label, tasks: $0.tasks) })
        let waiting = try await store.pendingCount()
        if waiting > 0 { CLIEnvironment.current.err("docket: \(SyncCommand.count(waiting, "change")) wait to be sent ('docket sync')\n") }
    }

    /// "change_request" → "Change Request".
    static func label(of table: String) -> String {
        table.split(separator: "_").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined(separator: " ")
    }

    private func render(_ groups: [TaskGroup]) {
        let environment = CLIEnvironment.current
        if output.json {
            let value = JSONValue(members: groups.map { group in
                (group.label, .array(group.tasks.map { task in
                    .object([
                        "number": .string(task.number), "short_description": .string(task.shortDescription),
                        "sys_id": .string(task.sysID), "created": .string(task.created), "link": .string(task.link)])
                }))
            })
            environment.print(String(decoding: value.serialized(), as: UTF8.self))
            return
        }
        if groups.isEmpty {
            environment.print("No active tasks assigned to you.")
            return
        }
        let now = Date()
        for (index, group) in groups.enumerated() {
            if index > 0 { environment.print("") }
            environment.print("\(group.label) (\(group.tasks.count))")
            let width = group.tasks.map(\.number.count).max() ?? 10
            for task in group.tasks {
                let number = task.number.padding(toLength: width, withPad: " ", startingAt: 0)
                let age = Age.since(task.created, now: now).padding(toLength: 4, withPad: " ", startingAt: 0)
                environment.print("  \(number)  \(age)  \(task.shortDescription)")
            }
        }
    }
}

/// "3d", "5h", "12m" since a UTC date-time.
enum Age {
    static func since(_ text: String, now: Date) -> String {
        guard let date = GlideDateTime.parse(text) else { return "" }
        let seconds = max(0, now.timeIntervalSince(date))
        switch seconds {
        case ..<3600: return "\(Int(seconds / 60))m"
        case ..<86_400: return "\(Int(seconds / 3600))h"
        default: return "\(Int(seconds / 86_400))d"
        }
    }
}
