@testable import DocketCLI
@testable import DocketKit
import DocketModel
import DocketTestSupport
import Foundation
import Synchronization
import Testing

/// Runs `docket` commands in-process with captured output, a throw-away config folder and stdin lines.
final class CLIHarness: Sendable {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docket-cli-\(UUID().uuidString)")
    private let output = Mutex(("", ""))
    private let input: Mutex<[String]>
    private let terminal: Bool

    init(stdin: [String] = [], terminal: Bool = false) {
        input = Mutex(stdin)
        self.terminal = terminal
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    var environment: CLIEnvironment {
        var environment = CLIEnvironment(
            out: { text in self.output.withLock { $0.0 += text } },
            err: { text in self.output.withLock { $0.1 += text } },
            readLine: { self.input.withLock { $0.isEmpty ? nil : $0.removeFirst() } },
            readPassword: { _ in self.input.withLock { $0.isEmpty ? nil : $0.removeFirst() } },
            stderrIsTerminal: terminal, configDirectory: directory,
            credentialStore: FileCredentialStore(directory: directory), transport: URLSessionTransport()
        )
        // No desktop browser in tests: the test plays it.
        environment.openInBrowser = { _ in false }
        return environment
    }

    /// Runs one command; returns the exit code, stdout and stderr of that command alone.
    func run(_ arguments: String..., stdin: [String] = []) async -> (code: Int32, out: String, err: String) {
        input.withLock { $0 += stdin }
        output.withLock { $0 = ("", "") }
        let code = await DocketCommand.run(arguments, environment: environment)
        let (out, err) = output.withLock { $0 }
        return (code, out, err)
    }

    /// What the command running now has printed to stdout so far.
    func outputSoFar() -> String { output.withLock { $0.0 } }

    /// What the command running now has printed to stderr so far.
    func errorsSoFar() -> String { output.withLock { $0.1 } }

    func login(_ base: String, user: String = "john.doe", password: String = "password") async -> Int32 {
        await run("login", base, "--user", user, "--password-stdin", stdin: [password]).code
    }
}

@Suite("docket command")
struct CLITests {
    @Test("login saves credentials (0600) and whoami shows the user; logout forgets them")
    func loginFlow() async throws {
        try await withLiveServer { base throws in
            let cli = CLIHarness()
            let login = await cli.run("login", base, "--user", "john.doe", "--password-stdin", stdin: ["password"])
            #expect(login.code == 0)
            #expect(login.out == "Logged in to \(base) as John Doe (john.doe).\n")
            let file = cli.directory.appendingPathComponent("credentials.json").path
            let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            let whoami = await cli.run("whoami")
            #expect(whoami.code == 0)
            #expect(whoami.out == "John Doe (john.doe) on \(base) <john.doe@example.com>\n")
            #expect(await cli.run("whoami", "--json").out.contains(#""user_name":"john.doe""#))
            #expect(await cli.run("logout").code == 0)
            let after = await cli.run("whoami")
            #expect(after.code == 1)
            #expect(after.err.contains("not logged in"))
        }
    }

    @Test("login keeps a refresh token, never the password; logout revokes it on the server")
    func loginKeepsNoPassword() async throws {
        try await withLiveServer { base throws in
            let cli = CLIHarness()
            #expect(await cli.login(base) == 0)
            let file = cli.directory.appendingPathComponent("credentials.json")
            let saved = try String(contentsOf: file, encoding: .utf8)
            #expect(saved.contains("refreshToken"))
            #expect(!saved.contains("password"))
            let target = try Instance(base)
            guard case .refreshToken(_, _, _, let refresh) = try FileCredentialStore(directory: cli.directory).credentials(for: target) else {
                Issue.record("no refresh token saved")
                return
            }
            #expect(await cli.run("tasks").code == 0)
            #expect(await cli.run("logout").code == 0)
            // The token no longer works anywhere.
            let revoked = DocketSession(
                instance: target, credentials: .refreshToken(clientID: "docket-cli", clientSecret: "docket-cli", userName: "john.doe", refreshToken: refresh)
            )
            await #expect(throws: DocketError.self) { _ = try await DocketClient(session: revoked).myWork.myTasks() }
        }
    }

    @Test("logout with the instance gone: the login is forgotten here, and the command says (exit 1) that the instance did not confirm its end")
    func logoutUnconfirmed() async throws {
        let cli = CLIHarness()
        let instance = try await withLiveServer { base throws in
            #expect(await cli.login(base) == 0)
            return base
        }
        let result = await cli.run("logout", "--instance", instance)
        #expect(result.code == 1)
        #expect(result.err.contains("forgotten here, but the instance did not confirm its end"))
        #expect(!result.out.contains("Logged out"))
        #expect(try FileCredentialStore(directory: cli.directory).credentials(for: Instance(instance)) == nil)
    }

    @Test("login --sso: the device grant through a browser elsewhere; the CLI keeps the rotating refresh token (never a password), commands work, logout revokes", .timeLimit(.minutes(2)))
    func singleSignOn() async throws {
        try await withLiveServer { base throws in
            let cli = CLIHarness()
            let login = Task { await cli.run("login", base, "--sso") }
            var code = ""
            for _ in 0..<100 where code.isEmpty {
                if let range = cli.outputSoFar().range(of: "enter the code ") {
                    code = String(cli.outputSoFar()[range.upperBound...].prefix(9))
                } else {
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            #expect(cli.outputSoFar().contains(base + "/realms/docket/device"))
            try await Browser(base: base).approveDevice(code: code)
            let result = await login.value
            #expect(result.code == 0, "\(result.err)")
            #expect(result.out.contains("Signed in to \(base) as john.doe."))
            let target = try Instance(base)
            guard case .openID(let first) = try FileCredentialStore(directory: cli.directory).credentials(for: target) else {
                Issue.record("no OpenID sign-in saved")
                return
            }
            #expect(!(try String(contentsOf: cli.directory.appendingPathComponent("credentials.json"), encoding: .utf8)).contains("password"))
            #expect(await cli.run("tasks").code == 0)
            // The refresh token rotated on use, and the new one was saved at once.
            guard case .openID(let second) = try FileCredentialStore(directory: cli.directory).credentials(for: target) else { return }
            #expect(second.refreshToken != first.refreshToken)
            #expect(await cli.run("whoami").out.contains("john.doe"))
            #expect(await cli.run("logout").code == 0)
            let revoked = DocketSession(instance: target, credentials: .openID(second))
            await #expect(throws: DocketError.self) { _ = try await DocketClient(session: revoked).myWork.myTasks() }
        }
    }

    @Test("login --sso --browser: the authorization code flow with a loopback redirect; the login keeps the refresh token", .timeLimit(.minutes(2)))
    func singleSignOnInBrowser() async throws {
        try await withLiveServer { base throws in
            let cli = CLIHarness()
            let login = Task { await cli.run("login", base, "--sso", "--browser") }
            var address = ""
            for _ in 0..<100 where address.isEmpty {
                if let range = cli.outputSoFar().range(of: "on this machine: ") {
                    address = String(cli.outputSoFar()[range.upperBound...].prefix { !$0.isNewline })
                } else {
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            let url = try #require(URL(string: address))
            #expect(address.contains("code_challenge_method=S256") && address.contains("redirect_uri=http://127.0.0.1:"))
            #expect(try await Browser(base: base).authorize(url) == 200)
            let result = await login.value
            #expect(result.code == 0, "\(result.err)")
            #expect(result.out.contains("Signed in to \(base) as john.doe."))
            guard case .openID = try FileCredentialStore(directory: cli.directory).credentials(for: try Instance(base)) else {
                Issue.record("no OpenID sign-in saved")
                return
            }
            #expect(await cli.run("tasks").code == 0)
            #expect(await cli.run("login", base, "--browser").code == 2)
        }
    }

    @Test("an expired login asks for the password again and carries on; without one to ask, says to log in")
    func expiredLogin() async throws {
        try await withLiveServer { base throws in
            let cli = CLIHarness()
            #expect(await cli.login(base) == 0)
            let store = FileCredentialStore(directory: cli.directory)
            let target = try Instance(base)
            try store.save(.refreshToken(clientID: "docket-cli", clientSecret: "docket-cli", userName: "john.doe", refreshToken: "expired"), for: target)
            let refused = await cli.run("whoami")
            #expect(refused.code == 1)
            #expect(refused.err.contains("docket login"))
            let asked = await cli.run("whoami", stdin: ["password"])
            #expect(asked.code == 0)
            #expect(asked.out.hasPrefix("John Doe (john.doe)"))
            #expect(await cli.run("whoami").code == 0)
        }
    }

    @Test("without an OAuth client the login keeps the session cookie; --save-password keeps the password, with a warning")
    func cookieAndSavedPassword() async throws {
        try await withLiveServer { base throws in
            let admin = DocketClient(session: DocketSession(instance: try Instance(base), credentials: .basic(userName: "admin", password: "admin")))
            let clients = try await admin.table.records(in: "oauth_entity", query: .where("client_id", .equals, "docket-cli"))
            for client in clients.records { try await admin.table.deleteRecord(client.sysID, in: "oauth_entity") }
            let cli = CLIHarness()
            #expect(await cli.login(base) == 0)
            let saved = try String(contentsOf: cli.directory.appendingPathComponent("credentials.json"), encoding: .utf8)
            #expect(saved.contains("JSESSIONID"))
            #expect(!saved.contains("password"))
            #expect(await cli.run("tasks").code == 0)
            #expect(await cli.run("logout").code == 0)
            let keeper = CLIHarness()
            let login = await keeper.run("login", base, "--user", "john.doe", "--password-stdin", "--save-password", stdin: ["password"])
            #expect(login.code == 0)
            #expect(login.err.contains("warning"))
            let kept = try String(contentsOf: keeper.directory.appendingPathComponent("credentials.json"), encoding: .utf8)
            #expect(kept.contains("password"))
        }
    }

    @Test("a private CA: login without it says to give --ca-file; with it every command and the WebSocket trust it", .timeLimit(.minutes(4)))
    func privateCA() async throws {
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        try await withLiveServer(tls: certificates) { base in
            let cli = CLIHarness()
            let untrusted = await cli.run("login", base, "--user", "john.doe", "--password-stdin", stdin: ["password"])
            #expect(untrusted.code == 1)
            #expect(untrusted.err.contains("--ca-file"), "\(untrusted.err)")
            let login = await cli.run("login", base, "--user", "john.doe", "--ca-file", certificates.caFile, "--password-stdin", stdin: ["password"])
            #expect(login.code == 0, "\(login.err)")
            // Later commands use the saved CA: requests, the event stream and the WebSocket.
            let tasks = await cli.run("tasks")
            #expect(tasks.code == 0, "\(tasks.err)")
            #expect(tasks.out.contains("INC0010001"))
            let admin = try DocketClient(
                instance: base, credentials: .basic(userName: "admin", password: "admin"),
                transport: try Transports.platform(trusting: TrustedCertificates(pemFile: certificates.caFile))
            )
            for websocket in [false, true] {
                let watch = Task {
                    websocket
                        ? await cli.run("watch", "--table", "incident", "--count", "1", "--websocket")
                        : await cli.run("watch", "--table", "incident", "--count", "1")
                }
                // The watch follows from when it connected: poke until it has printed a poke of this round.
                let marker = websocket ? "poke-ws" : "poke-sse"
                var pokes = 0
                while !cli.outputSoFar().contains(marker), pokes < 50 {
                    _ = try await admin.table.updateRecord(Demo.incident1, in: "incident", with: ["description": "\(marker) \(pokes)"])
                    pokes += 1
                    try await Task.sleep(for: .milliseconds(200))
                }
                let watched = await watch.value
                #expect(watched.code == 0, "websocket \(websocket): \(watched.err)")
                #expect(watched.out.contains("INC0010001") && watched.out.contains(marker), "websocket \(websocket)")
            }
            // A file that is no CA is said to be one.
            let bogus = certificates.folder.appendingPathComponent("ext.cnf").path
            let refused = await cli.run("tasks", "--ca-file", bogus)
            #expect(refused.code == 1)
            #expect(refused.err.contains("holds no certificate"), "\(refused.err)")
        }
    }

    @Test("login to an address without a scheme, or with a path where no instance answers, names the fix")
    func loginAddresses() async throws {
        try await withLiveServer { base in
            let cli = CLIHarness()
            let hostAndPort = String(base.dropFirst("http://".count))
            let schemeless = await cli.run("login", hostAndPort, "--user", "john.doe", "--password-stdin", stdin: ["password"])
            #expect(schemeless.code == 1)
            #expect(schemeless.err.contains("log in to http://\(hostAndPort)"), "\(schemeless.err)")
            let path = await cli.run("login", base + "/foo", "--user", "john.doe", "--password-stdin", stdin: ["password"])
            #expect(path.code == 1)
            #expect(path.err.contains("no Docket or ServiceNow instance answers at \(base)/foo"), "\(path.err)")
            #expect(path.err.contains("such as \(base)"), "\(path.err)")
        }
    }

    @Test("one wrong password is one failed login; once throttled, the CLI says how long to wait")
    func failedLoginsCountOnce() async throws {
        try await withLiveServer { base in
            let cli = CLIHarness()
            // docketd lets five failures of one user from one address go by, then makes each further one wait: the
            // sixth starts the wait and the seventh, within it, is refused. Counted twice, the fourth would be.
            for attempt in 1...6 {
                let failed = await cli.run("login", base, "--user", "beth.anglin", "--password-stdin", stdin: ["wrong"])
                #expect(failed.code == 1)
                #expect(failed.err.contains("wrong user name or password"), "attempt \(attempt): \(failed.err)")
            }
            let throttled = await cli.run("login", base, "--user", "beth.anglin", "--password-stdin", stdin: ["wrong"])
            #expect(throttled.code == 1)
            #expect(throttled.err.contains("too many attempts: try again in "), "\(throttled.err)")
        }
    }

    @Test("a wrong password is exit 1 with a message a person can act on, and saves nothing")
    func wrongPassword() async throws {
        try await withLiveServer { base throws in
            let cli = CLIHarness()
            let result = await cli.run("login", base, "--user", "john.doe", "--password-stdin", stdin: ["wrong"])
            #expect(result.code == 1)
            #expect(result.err.hasPrefix("docket: wrong user name or password"))
            #expect(!FileManager.default.fileExists(atPath: cli.directory.appendingPathComponent("credentials.json").path))
        }
    }

    @Test("tasks lists my active tasks under type headings with number, age and description")
    func tasks() async throws {
        try await withLiveServer { base throws in
            let cli = CLIHarness()
            #expect(await cli.login(base) == 0)
            let result = await cli.run("tasks")
            #expect(result.code == 0)
            let lines = result.out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            #expect(lines.first == "Incident (10)")
            #expect(lines[1].hasPrefix("  INC0010001  "))
            #expect(lines[1].hasSuffix("Unable to connect to office wifi"))
            #expect(lines[1].contains("d  "))
            #expect(lines.contains("Problem (4)"))
            #expect(lines.contains { $0.hasPrefix("Change Request (") })
            let json = await cli.run("tasks", "--json").out
            #expect(json.hasPrefix(#"{"Incident":[{"number":"INC0010001""#))
            let empty = CLIHarness()
            #expect(await empty.login(base, user: "abel.tuter") == 0)
            #expect(await empty.run("tasks").out == "No active tasks assigned to you.\n")
        }
    }

    @Test("show prints main fields and the latest journal; comment adds one; unknown tasks are exit 1")
    func showAndComment() async throws {
        try await withLiveServer { base throws in
            let cli = CLIHarness()
            #expect(await cli.login(base) == 0)
            let comment = await cli.run("comment", "inc0010001", "Replaced the router")
            #expect(comment.code == 0)
            #expect(comment.out == "Added a comment to INC0010001.\n")
            let show = await cli.run("show", "INC0010001")
            #expect(show.code == 0)
            #expect(show.out.contains("Number             INC0010001\n"))
            #expect(show.out.contains("State              In Progress\n"))
            #expect(show.out.contains("Assigned to        John Doe\n"))
            #expect(show.out.contains("john.doe  (comment)\n  Replaced the router\n"))
            let note = await cli.run("comment", "INC0010001", "Checked the logs", "--work-note")
            #expect(note.out == "Added a work note to INC0010001.\n")
            #expect(await cli.run("show", "INC0010001").out.contains("john.doe  (work note)\n  Checked the logs\n"))
            let byID = await cli.run("show", Demo.incident1, "--json")
            #expect(byID.code == 0)
            #expect(byID.out.contains(#""value":"Replaced the router""#))
            let missing = await cli.run("show", "INC0000000")
            #expect(missing.code == 1)
            #expect(missing.err == "docket: no task INC0000000\n")
        }
    }

    @Test("records pages through a table as a table or JSON")
    func records() async throws {
        try await withLiveServer { base throws in
            let cli = CLIHarness()
            #expect(await cli.login(base, user: "admin", password: "admin") == 0)
            let table = await cli.run("records", "incident", "--fields", "number,priority", "--limit", "3", "--display-value", "true")
            #expect(table.code == 0)
            #expect(table.out.hasPrefix("number      priority\nINC0010001  3 - Moderate\n"))
            #expect(table.out.hasSuffix("(3 of 22)\n"))
            let json = await cli.run("records", "incident", "--fields", "number", "--limit", "22", "--page-size", "5", "--json")
            #expect(json.code == 0)
            let parsed = try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [[String: String]]
            #expect(parsed?.count == 22)
            #expect(Set(parsed?.compactMap { $0["number"] } ?? []).count == 22)
            let query = await cli.run("records", "incident", "--query", "number=INC0010002", "--fields", "number", "--json")
            #expect(query.out == #"[{"number":"INC0010002"}]"# + "\n")
            // Without --fields: the useful columns, with names and labels.
            let plain = await cli.run("records", "incident", "--limit", "2")
            let header = plain.out.split(separator: "\n").first.map(String.init) ?? ""
            #expect(header.hasPrefix("number      short_description"), "\(header)")
            #expect(header.contains("state") && header.contains("priority") && header.contains("assigned_to"), "\(header)")
            #expect(plain.out.contains("John Doe") && plain.out.contains("In Progress"), "\(plain.out)")
            #expect(!header.contains("sys_"))
            let users = await cli.run("records", "sys_user", "--query", "user_name=beth.anglin")
            #expect(users.out.hasPrefix("name         user_name"), "\(users.out)")
        }
    }

    @Test("paging shows progress on stderr only when stderr is a terminal")
    func progress() async throws {
        try await withLiveServer { base throws in
            for terminal in [true, false] {
                let cli = CLIHarness(terminal: terminal)
                #expect(await cli.login(base) == 0)
                let result = await cli.run("records", "incident", "--fields", "number", "--limit", "22", "--page-size", "5", "--json")
                #expect(result.code == 0)
                #expect(result.err.contains("Fetched 22 of 22 records") == terminal)
                #expect(result.out.hasPrefix("[{"))
            }
        }
    }

    @Test("every command's help reads as prose: no stray runs of spaces in its overview")
    func helpText() async throws {
        let cli = CLIHarness()
        for command in DocketCommand.configuration.subcommands.map({ $0.configuration.commandName ?? "" }) {
            let help = await cli.run("help", command)
            #expect(help.code == 0, "\(command)")
            let text = help.out + help.err
            guard let start = text.range(of: "OVERVIEW:"), let end = text.range(of: "USAGE:") else {
                Issue.record("\(command): no overview")
                continue
            }
            let overview = text[start.upperBound..<end.lowerBound]
            for line in overview.split(separator: "\n") {
                let prose = line.trimmingCharacters(in: .whitespaces)
                #expect(prose.range(of: #"\S {2,}\S"#, options: .regularExpression) == nil, "\(command): \(prose)")
            }
        }
    }

    @Test("usage errors are exit 2; --help and --version are exit 0")
    func usage() async {
        let cli = CLIHarness()
        #expect(await cli.run("records").code == 2)
        #expect(await cli.run("records", "incident", "--limit", "0").code == 2)
        #expect(await cli.run("records", "incident", "--query", "stateFOO1").code == 2)
        #expect(await cli.run("frobnicate").code == 2)
        let help = await cli.run("--help")
        #expect(help.code == 0)
        #expect(help.out.contains("login"))
        let version = await cli.run("--version")
        #expect(version.code == 0)
        #expect(version.out.trimmingCharacters(in: .whitespacesAndNewlines) == DocketVersion.current)
        // No terminal and no password on standard input: the message says how to give one.
        let noPassword = await cli.run("login", "http://127.0.0.1:9", "--user", "john.doe")
        #expect(noPassword.code == 1)
        #expect(noPassword.err.contains("--password-stdin"), "\(noPassword.err)")
        let notLoggedIn = await cli.run("tasks")
        #expect(notLoggedIn.code == 1)
        #expect(notLoggedIn.err.contains("docket login"))
    }

    @Test("watch prints each change as it happens, one JSON object per line with --json", .timeLimit(.minutes(3)))
    func watch() async throws {
        try await withLiveServer { base throws in
            let cli = CLIHarness()
            #expect(await cli.login(base) == 0)
            let watching = Task {
                await cli.run(
                    "watch", "--table", "incident", "--query", "short_descriptionSTARTSWITHcli-watch", "--count", "2", "--json",
                    "--since", "0"
                )
            }
            let admin = try DocketClient(instance: base, credentials: .basic(userName: "admin", password: "admin"))
            let created = try await admin.table.createRecord(with: ["short_description": "cli-watch one"], in: "incident")
            _ = try await admin.table.updateRecord(created.sysID, in: "incident", with: ["urgency": "1"])
            let result = await watching.value
            #expect(result.code == 0)
            let lines = result.out.split(separator: "\n").map(String.init)
            #expect(lines.count == 2)
            let objects = try lines.map { try JSONValue.parse(Array($0.utf8)) }
            #expect(objects.map { $0["change"]?.stringValue } == ["entered", "changed"])
            #expect(objects.allSatisfy { $0["sys_id"]?.stringValue == created.sysID && $0["user"]?.stringValue == "admin" })
            #expect(objects[1]["record"]?["urgency"]?.stringValue == "1")
            // The same over a GraphQL WebSocket.
            let socket = await cli.run(
                "watch", "--websocket", "--table", "incident", "--query", "short_descriptionSTARTSWITHcli-watch", "--count", "2",
                "--json", "--since", "0"
            )
            #expect(socket.code == 0, "\(socket.err)")
            let socketLines = try socket.out.split(separator: "\n").map { try JSONValue.parse(Array($0.utf8)) }
            #expect(socketLines.map { $0["change"]?.stringValue } == ["entered", "changed"])
            #expect(socketLines.map { $0["sequence"]?.intValue } == objects.map { $0["sequence"]?.intValue })
            #expect(socketLines[1]["record"]?["urgency"]?.stringValue == "1")
            // Human lines: what happened, the number, the summary, who.
            let text = Task {
                await cli.run("watch", "--mine", "--query", "short_descriptionSTARTSWITHcli-watch", "--count", "1", "--since", "0")
            }
            let johnID = try await admin.table.records(in: "sys_user", query: .where("user_name", .equals, "john.doe")).records[0].sysID
            _ = try await admin.table.updateRecord(created.sysID, in: "incident", with: ["assigned_to": johnID])
            let human = await text.value
            #expect(human.code == 0)
            #expect(human.out.contains("entered"))
            #expect(human.out.contains("cli-watch one"))
            #expect(human.out.contains("(by admin)"))
            #expect(human.out.contains(created["number"] ?? "INC"))
            // A changed field with a choice list shows labels, as people read them, not stored values.
            let labelled = await cli.run(
                "watch", "--table", "incident", "--query", "short_descriptionSTARTSWITHcli-watch", "--count", "2", "--since", "0"
            )
            #expect(labelled.code == 0, "\(labelled.err)")
            #expect(labelled.out.contains("urgency: ") && labelled.out.contains(" → 1 - High"), "\(labelled.out)")
        }
    }

    @Test("watch refuses a query without a table, and an unknown table")
    func watchUsage() async throws {
        try await withLiveServer { base throws in
            let cli = CLIHarness()
            #expect(await cli.login(base) == 0)
            let usage = await cli.run("watch", "--query", "active=true")
            #expect(usage.code == 2)
            #expect(usage.err.contains("--query needs --table"))
            let socket = await cli.run("watch", "--websocket")
            #expect(socket.code == 2)
            #expect(socket.err.contains("--websocket follows one table"))
            let unknown = await cli.run("watch", "--table", "no_such_table")
            #expect(unknown.code == 1)
            #expect(unknown.err.contains("no_such_table") || unknown.err.contains("Invalid table"))
        }
    }
}

/// What `docket tasks --watch` says about each change to the list.
@Suite("docket tasks --watch wording")
struct TasksWatchWordingTests {
    static func change(_ kind: String, operation: String, fields: [String] = [], record: [String: String]) throws -> RecordChange {
        let json = JSONValue(members: [
            ("sequence", .integer(7)), ("change", .string(kind)), ("operation", .string(operation)),
            ("table", .string("incident")), ("sys_id", .string("abc")), ("fields", .array(fields.map(JSONValue.string))),
            ("user", .string("beth.anglin")), ("time", .string("2026-11-22 10:00:00")),
            ("record", JSONValue(members: record.map { ($0.key, .string($0.value)) })),
        ])
        return try RecordChange(json: json)
    }

    @Test("entered, changed, left (closed or reassigned) and deleted each read as a sentence")
    func describe() throws {
        #expect(TasksCommand.describe(try Self.change("entered", operation: "insert", record: ["number": "INC1"]))
            == "INC1 was created for you by beth.anglin")
        #expect(TasksCommand.describe(try Self.change("entered", operation: "update", record: ["number": "INC1"]))
            == "INC1 was assigned to you by beth.anglin")
        #expect(TasksCommand.describe(try Self.change(
            "changed", operation: "update", fields: ["sys_updated_on", "urgency"], record: ["number": "INC1"]
        )) == "INC1 was changed (urgency) by beth.anglin")
        #expect(TasksCommand.describe(try Self.change("left", operation: "update", record: ["number": "INC1", "active": "false"]))
            == "INC1 left your list (closed) by beth.anglin")
        #expect(TasksCommand.describe(try Self.change("left", operation: "update", record: ["number": "INC1", "active": "true"]))
            == "INC1 left your list by beth.anglin")
        #expect(TasksCommand.describe(try Self.change("deleted", operation: "delete", record: [:])) == "abc was deleted by beth.anglin")
    }
}

/// A browser for the CLI's tests: keeps its own cookies, follows nothing, reads the CSRF token from pages.
struct Browser {
    let base: String
    let transport: NIOHTTPTransport

    init(base: String) throws {
        self.base = base
        transport = try NIOHTTPTransport(trusting: nil, followingRedirects: false)
    }

    /// Signs in to the web UI as john.doe and allows the device sign-in with `code`.
    func approveDevice(code: String, user: String = "john.doe", password: String = "password") async throws {
        try await signedIn(user: user, password: password) { send, csrf in
            let page = try await send("GET", "/app/device?user_code=" + code, nil)
            #expect(page.status == 200)
            let allowed = try await send("POST", "/app/device", [("csrf", csrf(page)), ("user_code", code), ("decision", "allow")])
            #expect(allowed.status == 200)
        }
    }

    /// Signs in to the web UI, opens an authorization URL, and follows the provider's redirect to the app (the
    /// loopback address a command-line login listens on); returns that answer's status.
    func authorize(_ url: URL, user: String = "john.doe", password: String = "password") async throws -> Int {
        try await signedIn(user: user, password: password) { send, _ in
            var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
            let path = components.percentEncodedPath + "?" + (components.percentEncodedQuery ?? "")
            components.percentEncodedQuery = nil
            let answer = try await send("GET", path, nil)
            #expect(answer.status == 302, "\(String(decoding: answer.body, as: UTF8.self))")
            let location = try #require(answer.header("location").flatMap(URL.init(string:)))
            return try await transport.send(HTTPRequestData(method: "GET", url: location)).status
        }
    }

    private func signedIn<T>(
        user: String, password: String,
        _ body: (_ send: (String, String, [(String, String)]?) async throws -> HTTPResponseData, _ csrf: (HTTPResponseData) -> String) async throws -> T
    ) async throws -> T {
        var cookies: [String: String] = [:]
        func send(_ method: String, _ path: String, form: [(String, String)]? = nil) async throws -> HTTPResponseData {
            var headers: [String: String] = [:]
            if !cookies.isEmpty { headers["Cookie"] = cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") }
            var body: Data? = nil
            if let form {
                headers["Content-Type"] = "application/x-www-form-urlencoded"
                body = Data(form.map { Instance.encode($0.0) + "=" + Instance.encode($0.1) }.joined(separator: "&").utf8)
            }
            let response = try await transport.send(HTTPRequestData(method: method, url: URL(string: base + path)!, headers: headers, body: body))
            for header in response.headers["set-cookie"] ?? [] {
                let pair = header.prefix { $0 != ";" }.split(separator: "=", maxSplits: 1)
                if pair.count == 2 { cookies[String(pair[0])] = String(pair[1]) }
            }
            return response
        }
        func csrf(_ page: HTTPResponseData) -> String {
            let text = String(decoding: page.body, as: UTF8.self)
            guard let range = text.range(of: #"name="csrf" value=""#) else { return "" }
            return String(text[range.upperBound...].prefix { $0 != "\"" })
        }
        let signInPage = try await send("GET", "/")
        let signedIn = try await send("POST", "/app/login", form: [
            ("csrf", csrf(signInPage)), ("user_name", user), ("password", password), ("next", "/app/work"),
        ])
        #expect(signedIn.status == 303)
        return try await body({ method, path, form in try await send(method, path, form: form) }, csrf)
    }
}
