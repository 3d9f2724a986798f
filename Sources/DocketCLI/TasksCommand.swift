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

    func run() async throws {
        let groups = try await connection.client().myWork.myTasks()
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
