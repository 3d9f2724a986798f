import ArgumentParser
import DocketKit
import DocketModel
import DocketOffline
import Foundation

// The commands that work the same against both backends (ServiceNow tables and Compass) through `WorkBackend`.

/// `field=value` arguments.
enum FieldArguments {
    static func parse(_ arguments: [String]) throws -> [(String, String)] {
        try arguments.map { argument in
            guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex else {
                throw ValidationError("'\(argument)' is not field=value")
            }
            return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
        }
    }
}

/// How work items are printed.
enum WorkOutput {
    static func json(_ item: WorkItem) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("id", .string(item.id)), ("type", .string(item.type)), ("title", .string(item.title)),
            ("state", .string(item.state)), ("assignee", .string(item.assignee)), ("reporter", .string(item.reporter)),
            ("fields", JSONValue(members: item.fields.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
        ]
        if let actions = item.legalActions { members.append(("legal_actions", .array(actions.map(JSONValue.string)))) }
        return JSONValue(members: members)
    }

    /// An item of the offline copy, as the ServiceNow backend shows one.
    static func item(_ details: OfflineDetails) -> WorkItem {
        let record = details.record
        let caller = details.display("caller_id")
        return WorkItem(
            id: record.values["number"].flatMap { $0.isEmpty ? nil : $0 } ?? record.sysID,
            type: record.values["sys_class_name"].flatMap { $0.isEmpty ? nil : $0 } ?? record.table,
            title: details.display("short_description"), state: details.display("state"), assignee: details.display("assigned_to"),
            reporter: caller.isEmpty ? details.display("opened_by") : caller, fields: details.displayValues
        )
    }

    /// " (State)", or nothing for an item without states.
    static func state(_ item: WorkItem) -> String { item.state.isEmpty ? "" : " (\(item.state))" }

    static func text(_ value: JSONValue) -> String { String(decoding: value.serialized(), as: UTF8.self) }

    /// The main fields of an item, one per line.
    static func show(_ item: WorkItem, json: Bool) {
        let environment = CLIEnvironment.current
        if json { return environment.print(text(Self.json(item))) }
        var rows = [("Id", item.id), ("Type", item.type), ("Title", item.title), ("State", item.state),
                    ("Assigned to", item.assignee), ("Reported by", item.reporter)]
        for name in ["Severity", "Priority", "Project", "Resolution", "Submit_Date", "Description", "priority", "opened_at",
                     "description"] {
            if let value = item.fields[name], !value.isEmpty { rows.append((name.replacingOccurrences(of: "_", with: " "), value)) }
        }
        if let actions = item.legalActions, !actions.isEmpty { rows.append(("Actions", actions.joined(separator: ", "))) }
        let width = rows.map(\.0.count).max() ?? 0
        for (label, value) in rows where !value.isEmpty {
            environment.print(label.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + value)
        }
    }

    /// The notes of a Compass Notes_Log, in its order (newest first): each starts with a `==== … ====` line.
    static func notes(_ log: String) -> [(heading: String, text: String)] {
        var notes: [(heading: String, text: String)] = []
        for line in log.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("===="), trimmed.hasSuffix("===="), trimmed.count > 8 {
                notes.append((trimmed, ""))
            } else if !notes.isEmpty {
                notes[notes.count - 1].text += (notes[notes.count - 1].text.isEmpty ? "" : "\n") + line
            }
        }
        return notes.map { ($0.heading, $0.text.trimmingCharacters(in: .newlines)) }
    }

    /// A table of items.
    static func list(_ items: [WorkItem], person: KeyPath<WorkItem, String>, personLabel: String, json: Bool) {
        let environment = CLIEnvironment.current
        if json { return environment.print(text(.array(items.map(Self.json)))) }
        guard !items.isEmpty else { return environment.print("Nothing here.") }
        let rows = [["ID", "STATE", personLabel, "TITLE"]] + items.map { [$0.id, $0.state, $0[keyPath: person], $0.title] }
        let widths = (0..<3).map { column in min(30, rows.map { $0[column].count }.max() ?? 0) }
        for row in rows {
            let cells = (0..<3).map { row[$0].padding(toLength: widths[$0], withPad: " ", startingAt: 0) }
            environment.print((cells + [row[3]]).joined(separator: "  "))
        }
    }
}

struct DefectsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "defects",
        abstract: "List the defects assigned to you, or with --reported those you reported.",
        discussion: """
            With a Compass login this runs queries saved in your Personal Queries folder (created on first use); \
            with a ServiceNow login it reads docketd's defect table (--type picks another table, e.g. incident).
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Those you reported instead of those assigned to you.")
    var reported = false

    @Option(help: "Record type or table.")
    var type = "defect"

    @OptionGroup var output: OutputOptions

    @OptionGroup var offline: OfflineOptions

    func run() async throws {
        let (client, backend) = try connection.backend()
        let keeps = !offline.online && client.session.credentials.compassDatabase == nil && !client.session.credentials.isETO
        let items: [WorkItem]
        do {
            items = reported ? try await backend.reportedByMe(type: type) : try await backend.myItems(type: type)
        } catch where keeps && OfflineCopy.isUnreachable(error) {
            return try await listOffline(client, because: error)
        }
        show(items)
        if keeps { await keepCopy(items, client: client) }
    }

    private func show(_ items: [WorkItem]) {
        if reported {
            WorkOutput.list(items, person: \.assignee, personLabel: "ASSIGNED TO", json: output.json)
        } else {
            WorkOutput.list(items, person: \.reporter, personLabel: "REPORTED BY", json: output.json)
        }
    }

    /// The list's name in the offline copy.
    private var listName: String { (reported ? "reported:" : "mine:") + type }

    /// Keeps the listed items (with display values) and their table's choice lists, to list them offline.
    private func keepCopy(_ items: [WorkItem], client: DocketClient) async {
        let ids = items.compactMap { $0.fields["sys_id"].flatMap { $0.isEmpty ? nil : $0 } }
        do {
            let store = try OfflineCopy.open(client)
            if !ids.isEmpty {
                try await store.refresh(
                    type, query: .where("sys_id", .in, ids.joined(separator: ",")), limit: ids.count, displayValues: true, remember: false
                )
            }
            try await store.saveList(listName, table: type, ids: ids)
            try await store.keepChoices(of: type)
        } catch {
            CLIEnvironment.current.err("docket: warning: the offline copy could not be updated (\(error))\n")
        }
    }

    /// The list from the offline copy, saying so and how old it is.
    private func listOffline(_ client: DocketClient, because error: any Error) async throws {
        guard let store = try OfflineCopy.existing(client), let (records, asOf) = try await store.list(listName) else {
            throw CLIFailure("\(error) and there is no offline copy of this list yet (run the same 'docket defects' once while online)")
        }
        CLIEnvironment.current.err("docket: cannot reach the instance; the list from the offline copy, \(OfflineCopy.age(asOf))\n")
        var items: [WorkItem] = []
        for record in records {
            guard let details = try await store.details(record.sysID, in: record.table) else { continue }
            items.append(WorkOutput.item(details))
        }
        show(items)
    }
}

struct CreateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create a defect, an incident or any item: docket create defect Headline='…' Severity=2-Major.",
        discussion: """
            Field names are the backend's: Compass's (Headline, Description, Severity, Priority, Owner…) or the \
            table's (short_description, urgency, caller_id…). Missing mandatory fields are named in one message.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Record type or table: defect, incident…")
    var type: String

    @Argument(help: "field=value pairs.")
    var fields: [String] = []

    @OptionGroup var output: OutputOptions

    @OptionGroup var offline: OfflineOptions

    func run() async throws {
        let values = try FieldArguments.parse(fields)
        let (client, backend) = try connection.backend()
        do {
            let item = try await backend.create(type: type, fields: values)
            if output.json { return WorkOutput.show(item, json: true) }
            CLIEnvironment.current.print("Created \(item.id)\(WorkOutput.state(item)): \(item.title)")
        } catch where !offline.online && client.session.credentials.compassDatabase == nil && !client.session.credentials.isETO
            && OfflineCopy.isUnreachable(error)
        {
            // Offline the record gets its sys_id here (the instance keeps it) and its number when it is sent; values
            // are stored values, as the Table API takes them.
            let store = try OfflineCopy.open(client)
            let sysID = try await store.create(in: type, values: Dictionary(values, uniquingKeysWith: { $1 }))
            if output.json { return CLIEnvironment.current.print(WorkOutput.text(.object(["sys_id": .string(sysID), "queued": .bool(true)]))) }
            CLIEnvironment.current.print("Queued the new \(type) \(sysID): the instance cannot be reached; 'docket sync' sends it.")
        }
    }
}

struct EditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "edit", abstract: "Change fields of an item, keeping its state: docket edit ID field=value …"
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Item id: SAMPL00000001, INC0010001.")
    var id: String

    @Argument(help: "field=value pairs.")
    var fields: [String] = []

    @OptionGroup var output: OutputOptions

    @OptionGroup var offline: OfflineOptions

    func validate() throws {
        if fields.isEmpty { throw ValidationError("give at least one field=value") }
    }

    func run() async throws {
        let values = try FieldArguments.parse(fields)
        let (client, backend) = try connection.backend()
        do {
            let item = try await backend.edit(id, fields: values)
            if output.json { return WorkOutput.show(item, json: true) }
            CLIEnvironment.current.print("Updated \(item.id)\(WorkOutput.state(item)): \(item.title)")
        } catch where !offline.online && client.session.credentials.compassDatabase == nil && !client.session.credentials.isETO
            && OfflineCopy.isUnreachable(error)
        {
            // Offline, values are stored values (a choice's value, a reference's sys_id), as the Table API takes them.
            let record = try await OfflineQueue.record(id, client: client, because: error)
            try await record.store.update(record.sysID, in: record.table, values: Dictionary(values, uniquingKeysWith: { $1 }))
            CLIEnvironment.current.print("Queued the change to \(record.name): the instance cannot be reached; 'docket sync' sends it.")
        }
    }
}

struct TransitionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transition",
        abstract: "Move an item on: docket transition ID ACTION [field=value …]; without ACTION, list the possible ones.",
        discussion: """
            With Compass, ACTION is one of the record's legal actions (Assign, Open, Resolve…), and fields the action \
            makes mandatory (Resolve needs Resolution) are given as field=value. With ServiceNow tables ACTION is the \
            state to move to (Resolved, or its value 6); when the instance cannot be reached, the change is queued \
            in the offline copy (its states are those kept when an item was last listed or shown) for 'docket sync'.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Item id: SAMPL00000001, INC0010001.")
    var id: String

    @Argument(help: "The action, then field=value pairs.")
    var rest: [String] = []

    @OptionGroup var output: OutputOptions

    @OptionGroup var offline: OfflineOptions

    func run() async throws {
        let environment = CLIEnvironment.current
        let action = rest.first.flatMap { $0.contains("=") ? nil : $0 }
        let values = try FieldArguments.parse(action == nil ? rest : Array(rest.dropFirst()))
        let (client, backend) = try connection.backend()
        let queues = !offline.online && client.session.credentials.compassDatabase == nil && !client.session.credentials.isETO
        guard let action else {
            if !values.isEmpty { throw ValidationError("name the action before the fields") }
            let actions = try await backend.actions(for: id)
            if output.json {
                return environment.print(WorkOutput.text(.array(actions.map {
                    JSONValue(members: [("name", .string($0.name)), ("destination", .string($0.destination))])
                })))
            }
            let state = WorkOutput.state(try await backend.item(id))
            guard !actions.isEmpty else { return environment.print("No action is possible for \(id)\(state) now.") }
            environment.print("Possible actions for \(id)\(state):")
            for action in actions {
                environment.print("  " + action.name + (action.destination.isEmpty || action.destination == action.name ? "" : " → \(action.destination)"))
            }
            return
        }
        let item: WorkItem
        do {
            item = try await backend.transition(id, action: action, fields: values)
        } catch where queues && OfflineCopy.isUnreachable(error) {
            return try await queue(action, values: values, client: client, because: error)
        }
        if output.json { return WorkOutput.show(item, json: true) }
        environment.print("\(item.id) is now \(item.state): \(item.title)")
    }

    /// Offline: the state is found in the choice list the offline copy keeps for the item's class, and the change
    /// queued (other fields as stored values, as with 'docket edit' offline).
    private func queue(_ action: String, values: [(String, String)], client: DocketClient, because error: any Error) async throws {
        let found = try await OfflineQueue.record(id, client: client, because: error)
        guard let record = try await found.store.record(found.sysID, in: found.table) else { throw CLIFailure("no task \(id)") }
        let recordClass = record.values["sys_class_name"].flatMap { $0.isEmpty ? nil : $0 } ?? found.table
        let states = try await found.store.choices(in: recordClass, field: "state")
        guard !states.isEmpty else {
            throw CLIFailure("\(error), and the offline copy has no states for \(recordClass) (open an item once while online: 'docket show \(found.name)')")
        }
        guard let state = states.first(where: { $0.label.caseInsensitiveCompare(action) == .orderedSame || $0.value == action }) else {
            throw CLIFailure("\(found.name) has no state '\(action)'; its states are: " + states.map(\.label).joined(separator: ", "))
        }
        var changes = Dictionary(values, uniquingKeysWith: { $1 })
        changes["state"] = state.value
        try await found.store.update(found.sysID, in: found.table, values: changes)
        CLIEnvironment.current.print(
            "Queued: \(found.name) to \(state.label): the instance cannot be reached; 'docket sync' sends it."
        )
    }
}

struct DeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete an item.")

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Item id: SAMPL00000001, INC0010001.")
    var id: String

    func run() async throws {
        let (_, backend) = try connection.backend()
        try await backend.delete(id)
        CLIEnvironment.current.print("Deleted \(id).")
    }
}

struct ChoicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "choices", abstract: "List the values a field of an item may take: docket choices ID FIELD."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Item id: SAMPL00000001, INC0010001.")
    var id: String

    @Argument(help: "Field name: Severity, Priority, urgency…")
    var field: String

    @OptionGroup var output: OutputOptions

    func run() async throws {
        let environment = CLIEnvironment.current
        let (_, backend) = try connection.backend()
        let choices = try await backend.choices(for: id, field: field)
        if output.json {
            return environment.print(WorkOutput.text(.array(choices.map {
                JSONValue(members: [("value", .string($0.value)), ("label", .string($0.label))])
            })))
        }
        guard !choices.isEmpty else { return environment.print("\(field) of \(id) has no choice list.") }
        for choice in choices {
            environment.print(choice.value == choice.label ? choice.label : "\(choice.value)  \(choice.label)")
        }
    }
}
