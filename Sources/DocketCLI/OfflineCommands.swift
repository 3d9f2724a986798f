import ArgumentParser
import DocketKit
import DocketModel
import DocketOffline
import Foundation

/// The offline copy of a ServiceNow-style login: `DATA/OFFLINE-NAME.sqlite` (see ``CLIEnvironment/dataDirectory``).
enum OfflineCopy {
    /// The file of a login's copy: one per instance and user.
    static func path(for client: DocketClient) -> String {
        let base = client.session.instance.baseURL
        let name = [base.host ?? "instance", base.port.map(String.init) ?? "", client.session.credentials.userName]
            .filter { !$0.isEmpty }.joined(separator: "_")
        let safe = String(name.unicodeScalars.map { CharacterSet.alphanumerics.contains($0) || "._-@".unicodeScalars.contains($0) ? Character($0) : "_" })
        return CLIEnvironment.current.dataDirectory.appendingPathComponent(safe + ".sqlite").path
    }

    static func open(_ client: DocketClient) throws -> OfflineStore {
        let directory = CLIEnvironment.current.dataDirectory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return try OfflineStore(path: path(for: client), client: client)
    }

    /// The copy when it exists (a read that only looks at it must not create one).
    static func existing(_ client: DocketClient) throws -> OfflineStore? {
        FileManager.default.fileExists(atPath: path(for: client)) ? try open(client) : nil
    }

    /// Whether a failure means the instance could not be reached (rather than an answer to act on).
    static func isUnreachable(_ error: any Error) -> Bool {
        guard let error = error as? DocketError else { return false }
        if error.kind == .transport { return true }
        return error.kind == .http && [502, 503, 504].contains(error.status ?? 0)
    }

    /// "as of 3 min ago".
    static func age(_ date: Date?, now: Date = Date()) -> String {
        guard let date else { return "at an unknown time" }
        let seconds = Int(max(0, now.timeIntervalSince(date)))
        switch seconds {
        case ..<60: return "as of \(seconds) s ago"
        case ..<3600: return "as of \(seconds / 60) min ago"
        case ..<86_400: return "as of \(seconds / 3600) h ago"
        default: return "as of \(seconds / 86_400) days ago"
        }
    }
}

/// `--online`: the command talks to the instance only.
struct OfflineOptions: ParsableArguments {
    @Flag(help: "Talk to the instance only: no answer from the offline copy, nothing queued when it cannot be reached.")
    var online = false
}

struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Send the changes made while the instance could not be reached, and bring the offline copy up to date.",
        discussion: """
            Each queued change is sent once, in order per item, only to the version it was made on. A field someone \
            else changed meanwhile becomes a conflict: see 'docket conflicts', settle with 'docket resolve'. Exits 1 \
            when the instance could not be reached or asks you to log in again (nothing is lost).
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let client = try connection.serviceNowClient("sync")
        let store = try OfflineCopy.open(client)
        let report = try await store.sync()
        let environment = CLIEnvironment.current
        if output.json {
            environment.print(WorkOutput.text(JSONValue(members: [
                ("sent", .integer(report.sent)), ("conflicts", .integer(report.conflicts)), ("failed", .integer(report.failed)),
                ("waiting", .integer(report.remaining)), ("applied", .integer(report.applied)),
                ("unreachable", report.unreachable.map(JSONValue.string) ?? .null), ("needs_login", .bool(report.needsSignIn)),
            ])))
        } else {
            var parts = ["Sent \(Self.count(report.sent, "change"))"]
            if report.applied > 0 { parts.append("received \(Self.count(report.applied, "change")) from the instance") }
            if report.refetched { parts.append("read every item again (the instance's log no longer reached back)") }
            environment.print(parts.joined(separator: "; ") + ".")
            if report.conflicts > 0 || report.failed > 0 {
                let open = try await store.conflicts().count
                if open > 0 { environment.print("\(Self.count(open, "conflict")) to settle: see 'docket conflicts'.") }
                for operation in try await store.operations() where operation.state == .failed {
                    let number = try await store.record(operation.sysID, in: operation.table)?.values["number"] ?? operation.sysID
                    environment.print(
                        "Refused: change \(operation.id), \(operation.kind.rawValue) of \(number): \(operation.lastError ?? "")"
                            + " ('docket queue --retry \(operation.id)' or '--discard \(operation.id)')"
                    )
                }
            }
        }
        if let unreachable = report.unreachable {
            throw CLIFailure("could not reach the instance (\(unreachable)); \(Self.count(report.remaining, "change")) wait for the next 'docket sync'")
        }
        if report.needsSignIn {
            throw CLIFailure("the instance asks you to log in again; \(Self.count(report.remaining, "change")) wait: run 'docket login', then 'docket sync'")
        }
    }

    static func count(_ number: Int, _ noun: String) -> String { "\(number) \(noun)\(number == 1 ? "" : "s")" }
}

struct ConflictsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List changes made offline that meet someone else's change to the same field (or a deletion)."
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        let client = try connection.serviceNowClient("conflicts")
        let conflicts = try await OfflineCopy.existing(client)?.conflicts() ?? []
        let environment = CLIEnvironment.current
        if output.json {
            return environment.print(WorkOutput.text(.array(conflicts.map { conflict in
                JSONValue(members: [
                    ("number", conflict.number.map(JSONValue.string) ?? .null), ("table", .string(conflict.table)),
                    ("sys_id", .string(conflict.sysID)), ("kind", .string(conflict.kind.rawValue)), ("field", .string(conflict.field)),
                    ("base", conflict.base.map(JSONValue.string) ?? .null), ("mine", conflict.mine.map(JSONValue.string) ?? .null),
                    ("theirs", conflict.theirs.map(JSONValue.string) ?? .null),
                ])
            })))
        }
        if conflicts.isEmpty { return environment.print("No conflicts.") }
        for conflict in conflicts {
            let name = conflict.number ?? conflict.sysID
            switch conflict.kind {
            case .field:
                environment.print("\(name)  \(conflict.field): was '\(conflict.base ?? "")', yours '\(conflict.mine ?? "")', theirs '\(conflict.theirs ?? "")'")
            case .deletedOnServer:
                environment.print("\(name)  deleted on the instance; you changed it")
            case .changedOnServer:
                environment.print("\(name)  you deleted it; it was changed on the instance")
            }
        }
        environment.print("Settle each with: docket resolve NUMBER --mine | --theirs | FIELD=VALUE")
    }
}

struct ResolveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resolve",
        abstract: "Settle a conflict: keep your value (--mine), the instance's (--theirs), or give another (FIELD=VALUE).",
        discussion: "Without FIELD=VALUE the choice applies to every conflict of the item. Run 'docket sync' afterwards."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Item number (INC0010001) or sys_id.")
    var item: String

    @Argument(help: "FIELD=VALUE: the value to keep for that field.")
    var values: [String] = []

    @Flag(help: "Keep your change.")
    var mine = false

    @Flag(help: "Keep the instance's.")
    var theirs = false

    func validate() throws {
        let choices = (mine ? 1 : 0) + (theirs ? 1 : 0) + (values.isEmpty ? 0 : 1)
        if choices != 1 { throw ValidationError("choose one of --mine, --theirs or FIELD=VALUE") }
    }

    func run() async throws {
        let client = try connection.serviceNowClient("resolve")
        guard let store = try OfflineCopy.existing(client) else { throw CLIFailure("no conflicts: nothing was changed offline") }
        let all = try await store.conflicts().filter { $0.number == item.uppercased() || $0.sysID == item }
        guard !all.isEmpty else { throw CLIFailure("\(item) has no conflict (see 'docket conflicts')") }
        let environment = CLIEnvironment.current
        if mine || theirs {
            for conflict in all { try await store.resolve(conflict, with: mine ? .mine : .theirs) }
            return environment.print("Settled \(SyncCommand.count(all.count, "conflict")) of \(item): \(mine ? "yours" : "theirs") kept. 'docket sync' sends it.")
        }
        for (field, value) in try FieldArguments.parse(values) {
            guard let conflict = all.first(where: { $0.field == field }) else {
                throw CLIFailure("\(item) has no conflict on \(field); its conflicts: \(all.map { $0.field.isEmpty ? $0.kind.rawValue : $0.field }.joined(separator: ", "))")
            }
            try await store.resolve(conflict, with: .value(value))
            environment.print("Settled \(field) of \(item): '\(value)'. 'docket sync' sends it.")
        }
    }
}

struct QueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue",
        abstract: "List the changes waiting in the offline copy; --retry or --discard one the instance refused.",
        discussion: """
            Each line: the change's number, the item, what it does, its state (queued, sending, conflict, failed) and \
            the instance's last answer. A refused change (failed) holds back the later changes to the same item until \
            it is sent again (--retry N, after fixing the cause) or dropped (--discard N: the item shows the \
            instance's values again). Conflicts are settled with 'docket resolve'.
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    @Option(help: "Queue change N again (sent by the next 'docket sync').")
    var retry: Int64?

    @Option(help: "Drop change N.")
    var discard: Int64?

    func validate() throws {
        if retry != nil && discard != nil { throw ValidationError("choose one of --retry and --discard") }
    }

    func run() async throws {
        let client = try connection.serviceNowClient("queue")
        let environment = CLIEnvironment.current
        guard let store = try OfflineCopy.existing(client) else {
            if retry != nil || discard != nil { throw CLIFailure("no change \(retry ?? discard ?? 0): nothing was changed offline") }
            return environment.print(output.json ? "[]" : "Nothing waits to be sent.")
        }
        let operations = try await store.operations()
        if let id = retry ?? discard {
            guard let operation = operations.first(where: { $0.id == id }) else {
                throw CLIFailure("no change \(id) waits (see 'docket queue')")
            }
            if let retry {
                guard operation.state == .failed else {
                    throw CLIFailure("change \(retry) was not refused (it is \(operation.state.rawValue)): 'docket sync' sends it")
                }
                try await store.retry(retry)
                return environment.print("Change \(retry) is queued again: 'docket sync' sends it.")
            }
            try await store.discard(id)
            return environment.print("Dropped change \(id).")
        }
        var rows: [(PendingOperation, String)] = []
        for operation in operations {
            let name = try await store.record(operation.sysID, in: operation.table)?.values["number"].flatMap { $0.isEmpty ? nil : $0 }
            rows.append((operation, name ?? operation.sysID))
        }
        if output.json {
            return environment.print(WorkOutput.text(.array(rows.map { operation, name in
                JSONValue(members: [
                    ("id", .integer(Int(operation.id))), ("item", .string(name)), ("table", .string(operation.table)),
                    ("sys_id", .string(operation.sysID)), ("kind", .string(operation.kind.rawValue)),
                    ("state", .string(operation.state.rawValue)), ("attempts", .integer(operation.attempts)),
                    ("fields", JSONValue(members: operation.values.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
                    ("last_error", operation.lastError.map(JSONValue.string) ?? .null),
                ])
            })))
        }
        if rows.isEmpty { return environment.print("Nothing waits to be sent.") }
        for (operation, name) in rows {
            let fields = operation.values.keys.sorted().joined(separator: ", ")
            var line = "\(operation.id)  \(name)  \(operation.kind.rawValue)\(fields.isEmpty ? "" : " (\(fields))")  \(operation.state.rawValue)"
            if let error = operation.lastError { line += ": \(error)" }
            environment.print(line)
        }
    }
}
