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

    /// The item from the offline copy, saying so and how old it is: the fields as they were last shown (a value
    /// changed since shows its choice label, or itself), and the journal kept with the comments queued here.
    private func showOffline(_ client: DocketClient, because error: any Error) async throws {
        let found = try await OfflineQueue.record(task, client: client, because: error)
        guard let details = try await found.store.details(found.sysID, in: found.table) else { throw CLIFailure("no task \(task)") }
        let record = details.record
        let environment = CLIEnvironment.current
        // The fields and the journal are kept at different times (a sync brings fields; the journal comes with an
        // online 'show' and with the changes sync follows): each says its own age when they differ.
        let age = Self.offlineAge(fields: record.fetchedAt, journal: comments > 0 ? details.journalFetchedAt : nil)
        environment.err("docket: cannot reach the instance; \(found.name) from the offline copy, \(age)\n")
        let entries = Array(details.journal.prefix(comments))
        if output.json {
            return environment.print(WorkOutput.text(.object([
                "record": JSONValue(members: record.values.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }),
                "display": JSONValue(members: details.displayValues.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }),
                "journal": .array(entries.map {
                    JSONValue(members: [
                        ("element", .string($0.element)), ("value", .string($0.value)), ("sys_created_on", .string($0.createdOn)),
                        ("sys_created_by", .string($0.createdBy)), ("pending", .bool($0.isPending)),
                    ])
                }),
                "pending": .bool(record.hasPendingChanges),
            ])))
        }
        let width = Self.fields.map(\.1.count).max() ?? 0
        for (field, label) in Self.fields {
            let value = details.display(field)
            guard !value.isEmpty else { continue }
            environment.print("\(label.padding(toLength: width, withPad: " ", startingAt: 0))  \(value)")
        }
        if comments > 0 {
            environment.print("")
            if entries.isEmpty {
                environment.print(details.journalFetchedAt == nil
                    ? "The comments and work notes were not kept (open the item once while online)." : "No comments or work notes.")
            }
            for entry in entries {
                let kind = entry.element == "work_notes" ? "work note" : "comment"
                let who = entry.isPending ? "you, queued" : entry.createdBy
                environment.print("\(entry.createdOn)  \(who)  (\(kind))")
                for line in entry.value.split(separator: "\n", omittingEmptySubsequences: false) { environment.print("  \(line)") }
            }
        }
        if record.hasPendingChanges { environment.print("\nChanges made offline wait to be sent ('docket sync').") }
    }

    /// "as of 6 s ago", and the journal's own age when it was kept a minute or more before the fields.
    static func offlineAge(fields: Date?, journal: Date?, now: Date = Date()) -> String {
        var age = OfflineCopy.age(fields, now: now)
        if let journal, let fields, fields.timeIntervalSince(journal) >= 60 {
            age += "; its comments and work notes \(OfflineCopy.age(journal, now: now)), and newer ones may be missing"
        }
        return age
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
        // Values and display values: the offline copy keeps both.
        let record = try await Self.find(task, client: client, displayValue: .all)
        let entries = comments == 0 ? [] : try await client.myWork.comments(for: record.sysID, limit: max(comments, keptEntries))
        if !offline.online { await keep(record, journal: comments == 0 ? nil : entries, client: client) }
        let environment = CLIEnvironment.current
        let shownEntries = entries.prefix(comments)
        if output.json {
            let value = JSONValue.object([
                "record": Self.displayShaped(record.json),
                "journal": .array(shownEntries.map {
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
        if shownEntries.isEmpty {
            environment.print("No comments or work notes.")
        }
        for entry in shownEntries {
            let kind = entry.element == "work_notes" ? "work note" : entry.element == "comments" ? "comment" : entry.element
            environment.print("\(entry.createdOn)  \(entry.createdBy)  (\(kind))")
            for line in entry.value.split(separator: "\n", omittingEmptySubsequences: false) { environment.print("  \(line)") }
        }
    }

    /// How many journal entries an opened item keeps in the offline copy.
    private var keptEntries: Int { 20 }

    /// Keeps the item just shown in the offline copy (with its journal), to show it again offline. A copy that
    /// cannot be written costs a warning, never the answer just printed.
    private func keep(_ record: TableRecord, journal: [JournalEntry]?, client: DocketClient) async {
        do {
            try await OfflineCopy.open(client).keep(record, in: "task", journal: journal)
        } catch {
            CLIEnvironment.current.err("docket: warning: the offline copy could not be updated (\(error))\n")
        }
    }

    /// A record read with `sysparm_display_value=all`, as `sysparm_display_value=true` shows it: each field its
    /// display value, a reference its display value and link.
    static func displayShaped(_ json: JSONValue) -> JSONValue {
        guard let members = json.objectValue else { return json }
        return JSONValue(members: members.map { name, value in
            guard case .object = value else { return (name, value) }
            let shown = JSONValue.string(value["display_value"]?.stringValue ?? value["value"]?.stringValue ?? "")
            if let link = value["link"] { return (name, .object(["display_value": shown, "link": link])) }
            return (name, shown)
        })
    }

    /// A task by number or sys_id, with display values.
    static func find(_ reference: String, client: DocketClient, displayValue: DisplayValue = .true) async throws -> TableRecord {
        let looksLikeID = reference.count == 32 && reference.allSatisfy(\.isHexDigit)
        if looksLikeID {
            do {
                return try await client.myWork.task(reference, displayValue: displayValue)
            } catch let error as DocketError where error.status == 404 {
                throw CLIFailure("no task \(reference)")
            }
        }
        guard let record = try await client.myWork.task(number: reference.uppercased(), displayValue: displayValue) else {
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
