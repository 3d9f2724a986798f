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

    func run() async throws {
        let client = try connection.serviceNowClient("tasks")
        let environment = CLIEnvironment.current
        render(try await client.myWork.myTasks())
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
