import ArgumentParser
import DocketKit
import DocketModel
import Foundation

struct LoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Check credentials against an instance and save them for later commands.",
        discussion: "Asks for the password without echo; --password-stdin reads it from standard input instead."
    )

    @Argument(help: "Instance name (acme) or URL (http://127.0.0.1:8080).")
    var instance: String

    @Option(help: "User name.")
    var user: String

    @Flag(help: "Read the password from standard input (for scripts).")
    var passwordStdin = false

    @Option(help: "OAuth client id: log in with the OAuth password grant instead of Basic.")
    var clientID: String?

    @Option(help: "OAuth client secret (with --client-id).")
    var clientSecret: String?

    func run() async throws {
        let environment = CLIEnvironment.current
        let target = try Instance(instance)
        let password = passwordStdin ? environment.readLine() : environment.readPassword("Password for \(user): ")
        guard let password, !password.isEmpty else { throw CLIFailure("no password given") }
        let credentials: Credentials
        if let clientID {
            guard let clientSecret else { throw ValidationError("--client-id needs --client-secret") }
            credentials = .oauth(clientID: clientID, clientSecret: clientSecret, userName: user, password: password)
        } else {
            credentials = .basic(userName: user, password: password)
        }
        let client = DocketClient(
            session: DocketSession(instance: target, credentials: credentials, transport: environment.transport)
        )
        let me = try await WhoAmICommand.lookUp(user, client: client)
        try environment.credentialStore.save(credentials, for: target)
        try CLIConfiguration(instance: target.description, userName: user).save(to: environment.configDirectory)
        environment.print("Logged in to \(target) as \(me["name"] ?? user) (\(user)).")
    }
}

struct LogoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "logout", abstract: "Forget the saved credentials.")

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let environment = CLIEnvironment.current
        guard let name = connection.instance ?? CLIConfiguration.load(from: environment.configDirectory)?.instance else {
            throw CLIFailure("not logged in")
        }
        let target = try Instance(name)
        try environment.credentialStore.delete(for: target)
        try? FileManager.default.removeItem(at: CLIConfiguration.url(in: environment.configDirectory))
        environment.print("Logged out of \(target).")
    }
}

struct WhoAmICommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "whoami", abstract: "Show who you are logged in as.")

    @OptionGroup var connection: ConnectionOptions

    @OptionGroup var output: OutputOptions

    func run() async throws {
        let client = try connection.client()
        let me = try await Self.lookUp(client.session.credentials.userName, client: client)
        if output.json {
            CLIEnvironment.current.print(String(decoding: me.json.serialized(), as: UTF8.self))
        } else {
            CLIEnvironment.current.print(
                "\(me["name"] ?? "") (\(me["user_name"] ?? "")) on \(client.session.instance)"
                    + ((me["email"] ?? "").isEmpty ? "" : " <\(me["email"]!)>")
            )
        }
    }

    /// The user's record, as the seed apps check a login (`sys_user?user_name=…`).
    static func lookUp(_ userName: String, client: DocketClient) async throws -> TableRecord {
        let page = try await client.table.records(
            in: "sys_user", query: .where("user_name", .equals, userName),
            fields: ["sys_id", "user_name", "name", "email", "title"], limit: 1
        )
        guard let me = page.records.first else { throw CLIFailure("user \(userName) not found on the instance") }
        return me
    }
}
