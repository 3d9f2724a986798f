import ArgumentParser
import DocketKit
import DocketModel
import Foundation

struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print changes to records as they happen (needs docketd's live event stream).",
        discussion: """
            Follows every record you may read, or those of --table (and tables extending it) matching --query.
            Each change says whether the record entered, changed in, left or was deleted from what you follow:
            with --mine, a task reassigned away from you leaves. The connection is re-established after a network
            failure or a server restart, without missing or repeating a change. Stop with Ctrl-C.

            With a Compass login (docket login --repo --db), watch follows your defects (--mine is implied) and says \
            what others do to them, every field they changed: "SAMPL00000042 assigned to you by beth.anglin", \
            "SAMPL00000042 modified by beth.anglin (State: Opened → Resolved; Priority: '2-High' → '1-Critical')". It \
            needs docketd's event stream; the stock Compass app polls a query every five minutes instead.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "Only records of this table and the tables extending it (task covers incidents, problems…).")
    var table: String?

    @Option(help: "Only records matching this encoded query (needs --table, or --mine).")
    var query: String?

    @Flag(help: "Only tasks assigned to, opened by or raised by you (--table defaults to task).")
    var mine = false

    @Option(help: "Start after this event sequence (a 'sequence' printed earlier) instead of from now.")
    var since: Int?

    @Option(help: "Stop after this many changes.")
    var count: Int?

    @Flag(help: "Follow over a GraphQL WebSocket (docketd's subscriptions; needs --table or --mine) instead of Server-Sent Events.")
    var websocket = false

    @OptionGroup var output: OutputOptions

    static let mineQuery =
        "assigned_to=javascript:gs.getUserID()^ORopened_by=javascript:gs.getUserID()^ORcaller_id=javascript:gs.getUserID()"

    func validate() throws {
        if query != nil, table == nil, !mine { throw ValidationError("--query needs --table (or --mine).") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1.") }
        if let since, since < 0 { throw ValidationError("--since must be 0 or more.") }
        if websocket, table == nil, !mine { throw ValidationError("--websocket follows one table: give --table (or --mine).") }
    }

    func run() async throws {
        let client = try connection.workClient("watch")
        let environment = CLIEnvironment.current
        if client.session.credentials.compassDatabase != nil {
            guard table == nil, query == nil, since == nil, !websocket else {
                throw ValidationError("with a Compass login, watch follows your defects: leave out --table, --query, --since and --websocket")
            }
            return try await notifications(client.workBackend())
        }
        let table = self.table ?? (mine ? "task" : nil)
        let query = [mine ? Self.mineQuery : nil, self.query].compactMap { $0 }.joined(separator: "^")
        var since = self.since
        var printed = 0
        // Stored values become their labels ("state: In Progress → Resolved"), from each table's choice lists, read once
        // per table. A read that failed for a passing reason (the network, a server error) is tried again on the next
        // change; one refused (no access to sys_choice) is not. Either is said once on stderr.
        var labels: [String: [String: [WorkChoice]]] = [:]
        var warnedAboutLabels = false
        let backend = ServiceNowBackend(client: client)
        if !output.json, environment.stderrIsTerminal {
            environment.err("Watching \(table.map { "\($0) records" } ?? "every record you may read")\(query.isEmpty ? "" : " matching \(query)"); Ctrl-C stops.\n")
        }
        while true {
            var iterator = client.liveUpdates(
                table: table, query: query.isEmpty ? nil : query, since: since, transport: try connection.liveTransport(webSocket: websocket)
            ).makeAsyncIterator()
            do {
                while let change = try await iterator.next() {
                    if !output.json, change.kind == .changed, labels[change.table] == nil {
                        do {
                            labels[change.table] = try await backend.choiceLists(table: change.table)
                        } catch {
                            let refused = (error as? DocketError).map { $0.kind == .http && [401, 403, 404].contains($0.status) } ?? false
                            if refused { labels[change.table] = [:] }
                            if !warnedAboutLabels {
                                warnedAboutLabels = true
                                environment.err(
                                    "docket: the choice labels of \(change.table) could not be read (\(error)); showing stored values"
                                        + (refused ? "\n" : " until they can be\n")
                                )
                            }
                        }
                    }
                    environment.print(output.json ? Self.json(change) : Self.line(change, choices: labels[change.table] ?? [:]))
                    printed += 1
                    if let count, printed >= count { return }
                }
                return
            } catch let error as DocketError where error.kind == .resyncNeeded {
                // Changes were lost to the server's retention: say so, and go on from now.
                environment.err("docket: \(error.message); following from now\n")
                since = nil
            }
        }
    }

    /// What others do to my items, one notification a line, from the backend (Compass).
    private func notifications(_ backend: any WorkBackend) async throws {
        let environment = CLIEnvironment.current
        if !output.json, environment.stderrIsTerminal {
            environment.err("Watching your defects; Ctrl-C stops.\n")
        }
        var printed = 0
        for try await note in backend.watchMine() {
            if output.json {
                var members: [(String, JSONValue)] = [
                    ("sequence", .integer(note.sequence)), ("kind", .string(note.kind.rawValue)), ("id", .string(note.id)),
                    ("user", .string(note.user)), ("title", .string(note.title)), ("message", .string(note.message)),
                ]
                if let states = note.stateChange { members += [("from", .string(states.from)), ("to", .string(states.to))] }
                environment.print(WorkOutput.text(JSONValue(members: members)))
            } else {
                environment.print(note.message + (note.title.isEmpty ? "" : "  \(note.title)"))
            }
            printed += 1
            if let count, printed >= count { return }
        }
    }

    /// One line per change: time, what happened, the record, and who did it.
    static func line(_ change: RecordChange, choices: [String: [WorkChoice]] = [:]) -> String {
        let name = change["number"].isEmpty ? change.sysID : change["number"]
        var text = "\(change.time)  \(change.kind.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0))  \(change.table)  \(name)"
        let summary = change["short_description"]
        if !summary.isEmpty { text += "  \(summary)" }
        if change.kind == .changed {
            let shown = change.fields.filter { !$0.hasPrefix("sys_") }
            let details = shown.prefix(4).map { field -> String in
                guard let old = change.previous[field] else { return field }
                func shown(_ value: String) -> String {
                    Self.short(choices[field]?.first { $0.value == value }?.label ?? value)
                }
                return "\(field): \(shown(old)) → \(shown(change[field]))"
            }
            if !details.isEmpty { text += "  [" + details.joined(separator: ", ") + (shown.count > 4 ? ", …" : "") + "]" }
        }
        return text + "  (by \(change.user))"
    }

    private static func short(_ value: String) -> String {
        value.isEmpty ? "''" : value.count > 30 ? String(value.prefix(29)) + "…" : value
    }

    static func json(_ change: RecordChange) -> String {
        func object(_ row: [String: String]) -> JSONValue {
            JSONValue(members: row.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })
        }
        var members: [(String, JSONValue)] = [
            ("sequence", .integer(change.sequence)), ("change", .string(change.kind.rawValue)),
            ("operation", .string(change.operation)), ("table", .string(change.table)), ("sys_id", .string(change.sysID)),
            ("fields", .array(change.fields.map(JSONValue.string))), ("user", .string(change.user)),
            ("time", .string(change.time)), ("record", object(change.record)),
        ]
        if change.kind == .changed { members.append(("previous", object(change.previous))) }
        return String(decoding: JSONValue(members: members).serialized(), as: UTF8.self)
    }
}
