import ArgumentParser
import DocketKit
import DocketModel
import DocketOffline
import Foundation

struct ShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show an item's main fields and its latest comments and work notes (a Compass record's notes).",
        discussion: "--comments 0 leaves the journal out."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Task number (INC0010001), sys_id, a Compass record id (SAMPL00000001) or an ETO participant id (5001).")
    var task: String

    @Option(help: "How many journal entries (comments, work notes, Compass notes) to show.")
    var comments = 5

    func validate() throws {
        if comments < 0 { throw ValidationError("--comments is a number of entries, 0 or more") }
    }

    @OptionGroup var output: OutputOptions

    static let fields: [(String, String)] = [
        ("number", "Number"), ("sys_class_name", "Type"), ("short_description", "Short description"),
        ("state", "State"), ("priority", "Priority"), ("assigned_to", "Assigned to"),
        ("assignment_group", "Group"), ("opened_by", "Opened by"), ("opened_at", "Opened"),
        ("sys_updated_on", "Updated"), ("description", "Description"),
    ]

    @OptionGroup var offline: OfflineOptions

    func run() async throws {
        let client = try connection.client()
        if !offline.online, !client.session.credentials.isETO, client.session.credentials.compassDatabase == nil {
            do {
                try await show(client)
            } catch where OfflineCopy.isUnreachable(error) {
                try await showOffline(client, because: error)
            }
            return
        }
        try await show(client)
    }

    /// The item from the offline copy: stored values (no display values), saying so and how old they are.
    private func showOffline(_ client: DocketClient, because error: any Error) async throws {
        let found = try await OfflineQueue.record(task, client: client, because: error)
        guard let record = try await found.store.record(found.sysID, in: found.table) else { throw CLIFailure("no task \(task)") }
        let environment = CLIEnvironment.current
        environment.err("docket: cannot reach the instance; \(found.name) from the offline copy, \(OfflineCopy.age(record.fetchedAt))\n")
        if output.json {
            return environment.print(WorkOutput.text(.object([
                "record": JSONValue(members: record.values.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }),
                "pending": .bool(record.hasPendingChanges),
            ])))
        }
        let width = Self.fields.map(\.1.count).max() ?? 0
        for (field, label) in Self.fields {
            guard let value = record.values[field], !value.isEmpty else { continue }
            environment.print("\(label.padding(toLength: width, withPad: " ", startingAt: 0))  \(value)")
        }
        if record.hasPendingChanges { environment.print("\nChanges made offline wait to be sent ('docket sync').") }
    }

    private func show(_ client: DocketClient) async throws {
        if client.session.credentials.isETO {
            return WorkOutput.show(try await client.workBackend().item(task), json: output.json)
        }
        if client.session.credentials.compassDatabase != nil {
            let item = try await client.workBackend().item(task)
            let notes = Array(WorkOutput.notes(item.fields["Notes_Log"] ?? "").prefix(comments))
            if output.json {
                guard case .object(var members) = WorkOutput.json(item) else { return }
                members["notes"] = .array(notes.map { .object(["heading": .string($0.heading), "text": .string($0.text)]) })
                return CLIEnvironment.current.print(WorkOutput.text(.object(members)))
            }
            WorkOutput.show(item, json: false)
            guard comments > 0 else { return }
            let environment = CLIEnvironment.current
            environment.print("")
            if notes.isEmpty { environment.print("No notes.") }
            for note in notes {
                environment.print(note.heading)
                for line in note.text.split(separator: "\n", omittingEmptySubsequences: false) { environment.print("  \(line)") }
            }
            return
        }
        let record = try await Self.find(task, client: client)
        let entries = comments == 0 ? [] : try await client.myWork.comments(for: record.sysID, limit: comments)
        let environment = CLIEnvironment.current
        if output.json {
            let value = JSONValue.object([
                "record": record.json,
                "journal": .array(entries.map {
                    .object([
                        "element": .string($0.element), "value": .string($0.value),
                        "sys_created_on": .string($0.createdOn), "sys_created_by": .string($0.createdBy)])
                })])
            environment.print(String(decoding: value.serialized(), as: UTF8.self))
            return
        }
        let width = Self.fields.map(\.1.count).max() ?? 0
        for (field, label) in Self.fields {
            guard let value = record.displayValue(field), !value.isEmpty else { continue }
            environment.print("\(label.padding(toLength: width, withPad: " ", startingAt: 0))  \(value)")
        }
        guard comments > 0 else { return }
        environment.print("")
        if entries.isEmpty {
            environment.print("No comments or work notes.")
        }
        for entry in entries {
            let kind = entry.element == "work_notes" ? "work note" : entry.element == "comments" ? "comment" : entry.element
            environment.print("\(entry.createdOn)  \(entry.createdBy)  (\(kind))")
            for line in entry.value.split(separator: "\n", omittingEmptySubsequences: false) { environment.print("  \(line)") }
        }
    }

    /// A task by number or sys_id, with display values.
    static func find(_ reference: String, client: DocketClient) async throws -> TableRecord {
        let looksLikeID = reference.count == 32 && reference.allSatisfy(\.isHexDigit)
        if looksLikeID {
            do {
                return try await client.myWork.task(reference)
            } catch let error as DocketError where error.status == 404 {
                throw CLIFailure("no task \(reference)")
            }
        }
        guard let record = try await client.myWork.task(number: reference.uppercased()) else {
            throw CLIFailure("no task \(reference)")
        }
        return record
    }
}

struct CommentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "comment",
        abstract: "Add a comment (visible to the caller) or, with --work-note, a work note (fulfillers only) to a task."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Task number (INC0010001) or sys_id.")
    var task: String

    @Argument(help: "The comment text.")
    var text: String

    @Flag(help: "Add a work note, seen only by those who work on the task (through the My Work API).")
    var workNote = false

    @OptionGroup var offline: OfflineOptions

    func validate() throws {
        if text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { throw ValidationError("the comment is empty") }
    }

    func run() async throws {
        let client = try connection.workClient("comment")
        if client.session.credentials.compassDatabase != nil {
            if workNote { throw CLIFailure("Compass records have notes, not work notes: leave out --work-note") }
            try await client.workBackend().comment(on: task, text)
            return CLIEnvironment.current.print("Added a note to \(task).")
        }
        do {
            let record = try await ShowCommand.find(task, client: client)
            if workNote {
                try await client.myWork.addComment(text, to: record.sysID)
                CLIEnvironment.current.print("Added a work note to \(record["number"] ?? task).")
            } else {
                try await client.myWork.addCustomerComment(text, to: record.sysID)
                CLIEnvironment.current.print("Added a comment to \(record["number"] ?? task).")
            }
        } catch where !offline.online && OfflineCopy.isUnreachable(error) {
            let record = try await OfflineQueue.record(task, client: client, because: error)
            try await record.store.comment(record.sysID, in: record.table, text: text, field: workNote ? "work_notes" : "comments")
            CLIEnvironment.current.print(
                "Queued a \(workNote ? "work note" : "comment") to \(record.name): the instance cannot be reached; 'docket sync' sends it."
            )
        }
    }
}

/// Finding an item in the offline copy, to queue a change to it.
enum OfflineQueue {
    struct Found {
        let store: OfflineStore
        let table: String
        let sysID: String
        /// Its number, or the reference given.
        let name: String
    }

    static func record(_ reference: String, client: DocketClient, because error: any Error) async throws -> Found {
        guard let store = try OfflineCopy.existing(client), let record = try await store.find(reference) else {
            throw CLIFailure("\(error), and \(reference) is not in the offline copy (it keeps the items 'docket tasks' listed while online)")
        }
        return Found(store: store, table: record.table, sysID: record.sysID, name: record.values["number"] ?? reference)
    }
}
