import ArgumentParser
import DocketKit
import DocketModel
import Foundation

struct NotificationsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifications",
        abstract: "Show your notifications, newest first (docketd).",
        discussion: "What docketd told you about: items assigned to you, comments on and changes to your items. Mark them read with --mark-read."
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var output: OutputOptions

    @Flag(help: "Only the unread ones.")
    var unread = false

    @Option(help: "How many to show (1 to 1000).")
    var limit = 20

    @Flag(help: "Mark every unread notification read after showing them.")
    var markRead = false

    func validate() throws {
        guard (1...1000).contains(limit) else { throw ValidationError("--limit must be from 1 to 1000.") }
    }

    func run() async throws {
        let client = try connection.serviceNowClient("notifications")
        let environment = CLIEnvironment.current
        let (items, unreadCount) = try await client.notifications.list(unreadOnly: unread, limit: limit)
        if output.json {
            let value = JSONValue(members: [
                ("unread", .integer(unreadCount)),
                ("result", .array(items.map { item in
                    JSONValue(members: [
                        ("sys_id", .string(item.sysID)), ("subject", .string(item.subject)), ("message", .string(item.message)),
                        ("table", .string(item.table)), ("sys_id_of_record", .string(item.document)), ("read", .bool(item.read)),
                        ("created", .string(item.created)),
                    ])
                })),
            ])
            environment.print(String(decoding: value.serialized(), as: UTF8.self))
        } else if items.isEmpty {
            environment.print(unread ? "No unread notifications." : "No notifications.")
        } else {
            environment.print("\(unreadCount) unread")
            for item in items {
                environment.print("")
                environment.print((item.read ? "  " : "* ") + item.subject + "  (" + item.created + " UTC)")
                for line in item.message.split(separator: "\n", omittingEmptySubsequences: false) where !line.isEmpty {
                    environment.print("    " + line)
                }
            }
        }
        if markRead {
            let changed = try await client.notifications.markRead()
            if !output.json { environment.print("\nMarked \(changed) read.") }
        }
    }
}

struct NotifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notify",
        abstract: "Receive notifications on this machine or another device (docketd).",
        subcommands: [Register.self, Devices.self, Remove.self, Decrypt.self, Rules.self, Mute.self, Unmute.self]
    )

    /// Where the keys of this machine's UnifiedPush subscriptions are kept (0600, like the login).
    static func keysFile(_ environment: CLIEnvironment) -> URL {
        environment.configDirectory.appendingPathComponent("push-keys.json")
    }

    static func loadKeys(_ environment: CLIEnvironment) throws -> [String: WebPushKeys] {
        let url = keysFile(environment)
        // No file yet is no keys; a file that cannot be read is an error (making new keys would lose the old ones).
        guard FileManager.default.fileExists(atPath: url.path) else { return [:] }
        do {
            return try JSONDecoder().decode([String: WebPushKeys].self, from: Data(contentsOf: url))
        } catch {
            throw CLIFailure("\(url.path) cannot be read: \(error.localizedDescription)")
        }
    }

    static func saveKeys(_ keys: [String: WebPushKeys], _ environment: CLIEnvironment) throws {
        let url = keysFile(environment)
        let manager = FileManager.default
        try manager.createDirectory(at: environment.configDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if !manager.fileExists(atPath: url.path) {
            _ = manager.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        try manager.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(keys).write(to: url)
    }

    struct Register: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register a UnifiedPush endpoint (from a distributor such as ntfy) to receive your notifications.",
            discussion: "docketd checks that the endpoint answers as a UnifiedPush endpoint, then sends each notification to it encrypted (RFC 8291). The keys are made here and kept in push-keys.json beside your login (0600); 'docket notify decrypt' reads a message with them."
        )

        @OptionGroup var connection: ConnectionOptions

        @Option(name: .customLong("unifiedpush"), help: "The endpoint URL the distributor gave.")
        var endpoint: String

        @Option(help: "A name for this device in your list of devices.")
        var name: String?

        func run() async throws {
            let client = try connection.serviceNowClient("notify register")
            let environment = CLIEnvironment.current
            var saved = try NotifyCommand.loadKeys(environment)
            let keys = saved[endpoint] ?? WebPushKeys.generate()
            let id = try await client.notifications.register(
                .unifiedPush(endpoint: endpoint, p256dh: keys.p256dh, auth: keys.auth, name: name ?? ProcessInfo.processInfo.hostName)
            )
            saved[endpoint] = keys
            try NotifyCommand.saveKeys(saved, environment)
            environment.print("Registered \(endpoint) as device \(id).")
            environment.print("Its keys are in \(NotifyCommand.keysFile(environment).path); read a message with 'docket notify decrypt --endpoint \(endpoint) < message'.")
        }
    }

    struct Devices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the devices your notifications go to.")

        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            let client = try connection.serviceNowClient("notify devices")
            let environment = CLIEnvironment.current
            let records = try await client.table.records(
                in: "sys_push_subscription", query: try EncodedQuery("ORDERBYsys_created_on"),
                fields: ["sys_id", "kind", "name", "endpoint", "active", "sys_created_on"]
            ).records
            if output.json {
                environment.print(String(decoding: JSONValue.array(records.map(\.json)).serialized(), as: UTF8.self))
            } else if records.isEmpty {
                environment.print("No devices. Enable notifications in the web UI, or run 'docket notify register --unifiedpush URL'.")
            } else {
                for record in records {
                    let (name, kind) = (record["name"] ?? "", record["kind"] ?? "")
                    let label = name.isEmpty ? kind : "\(name) (\(kind))"
                    environment.print("\(record.sysID)  \(label)\(record["active"] == "false" ? "  paused" : "")")
                }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop sending notifications to one of your devices.")

        @OptionGroup var connection: ConnectionOptions

        @Argument(help: "The device's sys_id (see 'docket notify devices').")
        var sysID: String

        func run() async throws {
            let client = try connection.serviceNowClient("notify remove")
            try await client.notifications.unregister(sysID)
            CLIEnvironment.current.print("Removed device \(sysID).")
        }
    }

    struct Rules: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the notification rules and whether each reaches you.")

        @OptionGroup var connection: ConnectionOptions

        func run() async throws {
            let client = try connection.serviceNowClient("notify rules")
            for choice in try await client.notifications.preferences() {
                let devices = choice.mutedDevices.isEmpty ? "" : "  (off on \(choice.mutedDevices.count) device\(choice.mutedDevices.count == 1 ? "" : "s"))"
                CLIEnvironment.current.print((choice.enabled ? "on   " : "off  ") + choice.name + devices)
            }
        }
    }

    /// A rule named by its name (case-insensitive) or sys_id.
    static func rule(_ name: String, client: DocketClient) async throws -> NotificationRuleChoice {
        let rules = try await client.notifications.preferences()
        guard let found = rules.first(where: { $0.sysID == name || $0.name.lowercased() == name.lowercased() }) else {
            throw CLIFailure("no notification rule '\(name)'; 'docket notify rules' lists them")
        }
        return found
    }

    /// A rule, and optionally one device, to turn on or off.
    struct RuleChoice: ParsableArguments {
        @OptionGroup var connection: ConnectionOptions

        @Argument(help: "The rule's name (see 'docket notify rules').")
        var rule: String

        @Option(help: "Only on this device (its sys_id, see 'docket notify devices').")
        var device: String?

        func apply(enabled: Bool, command: String) async throws {
            let client = try connection.serviceNowClient(command)
            let found = try await NotifyCommand.rule(rule, client: client)
            try await client.notifications.setEnabled(enabled, rule: found.sysID, device: device)
            CLIEnvironment.current.print("'\(found.name)' is \(enabled ? "on" : "off")" + (device.map { " on device \($0)." } ?? "."))
        }
    }

    struct Mute: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop a notification rule from reaching you (or one of your devices).")
        @OptionGroup var choice: RuleChoice
        func run() async throws { try await choice.apply(enabled: false, command: "notify mute") }
    }

    struct Unmute: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Let a notification rule reach you (or one of your devices) again.")
        @OptionGroup var choice: RuleChoice
        func run() async throws { try await choice.apply(enabled: true, command: "notify unmute") }
    }

    struct Decrypt: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Read a pushed message (its raw body on standard input) with the keys kept for its endpoint."
        )

        @Option(help: "The endpoint it was sent to (as registered).")
        var endpoint: String

        @Option(help: "Read the message from this file instead of standard input.")
        var file: String?

        func run() async throws {
            let environment = CLIEnvironment.current
            guard let keys = try NotifyCommand.loadKeys(environment)[endpoint] else {
                throw CLIFailure("no keys for \(endpoint) here: register it with 'docket notify register --unifiedpush \(endpoint)'")
            }
            let body: Data
            if let file {
                guard let data = FileManager.default.contents(atPath: file) else { throw CLIFailure("\(file) cannot be read") }
                body = data
            } else {
                body = FileHandle.standardInput.readDataToEndOfFile()
            }
            do {
                environment.print(String(decoding: try keys.decrypt(body), as: UTF8.self))
            } catch let error as DocketError {
                throw CLIFailure(error.message)
            }
        }
    }
}
