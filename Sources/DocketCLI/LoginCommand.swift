import ArgumentParser
import DocketKit
import DocketModel
import Foundation

struct LoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Log in to an instance and keep the login (never the password) for later commands.",
        discussion: """
            Asks for the password without echo; --password-stdin reads it from standard input instead. The \
            password is used once: docket keeps an OAuth refresh token (docketd offers the docket-cli client; give \
            --client-id and --client-secret for an instance's own), or else the session cookie, and asks for the \
            password again when that expires. --save-password keeps the password itself instead, for unattended \
            scripts; anyone who can read the credential store can then log in as you.

            With --repo and --db, docket logs in to the Compass (Traxiem) REST API of that repository and database             instead (docketd serves SampleRepository/SAMPL): it keeps the Compass token (24 hours), and the work             commands (defects, show, create, edit, transition, delete, choices, watch --mine) speak Compass.
            """
    )

    static let defaultClientID = "docket-cli"
    static let defaultClientSecret = "docket-cli"

    @Argument(help: "Instance name (acme) or URL (http://127.0.0.1:8080).")
    var instance: String

    @Option(help: "User name.")
    var user: String

    @Flag(help: "Read the password from standard input (for scripts).")
    var passwordStdin = false

    @Option(help: "OAuth client id to log in with (default: docketd's docket-cli client, else a session cookie).")
    var clientID: String?

    @Option(help: "OAuth client secret (with --client-id).")
    var clientSecret: String?

    @Flag(help: "Save the password itself (not recommended: anyone who can read the credential store can use it).")
    var savePassword = false

    @Option(help: "Compass repository (SampleRepository): log in to the Compass API instead of ServiceNow's (needs --db).")
    var repo: String?

    @Option(help: "Compass database (SAMPL), with --repo.")
    var db: String?

    @Flag(help: "Sign in to the ETO (Efforts to Outcomes) API with your e-mail address as --user; then choose where to work with 'docket context'.")
    var eto = false

    func validate() throws {
        if (repo == nil) != (db == nil) { throw ValidationError("--repo and --db go together") }
        if repo != nil, clientID != nil { throw ValidationError("--client-id is for ServiceNow logins, not with --repo") }
        if eto, repo != nil || clientID != nil || savePassword {
            throw ValidationError("--eto goes without --repo, --client-id and --save-password")
        }
    }

    func run() async throws {
        let environment = CLIEnvironment.current
        let target = try Instance(instance)
        if clientID != nil, clientSecret == nil { throw ValidationError("--client-id needs --client-secret") }
        let password = passwordStdin ? environment.readLine() : environment.readPassword("Password for \(user): ")
        guard let password, !password.isEmpty else { throw CLIFailure("no password given") }
        if eto {
            let client = DocketClient(session: DocketSession(
                instance: target, credentials: .eto(ETOLogin(email: user)), transport: environment.transport
            ))
            try await client.eto.signIn(email: user, password: password)
            guard let login = await client.session.etoLogin else { throw CLIFailure("the ETO sign-in returned no token") }
            try environment.credentialStore.save(.eto(login), for: target)
            try CLIConfiguration(instance: target.description, userName: user).save(to: environment.configDirectory)
            return environment.print("Signed in to \(target) as \(user) (ETO). Choose where to work with 'docket context'.")
        }
        if let repo, let db {
            let credentials = try await Self.logIn(
                target, repository: repo, database: db, user: user, password: password, savePassword: savePassword,
                environment: environment
            )
            try environment.credentialStore.save(credentials, for: target)
            try CLIConfiguration(instance: target.description, userName: user, repository: repo, database: db)
                .save(to: environment.configDirectory)
            warnAboutSavedPassword(environment)
            return environment.print("Logged in to \(target) as \(user) (Compass \(repo)/\(db)).")
        }
        let (credentials, me) = try await Self.logIn(
            target, user: user, password: password, client: clientID.map { ($0, clientSecret ?? "") },
            savePassword: savePassword, environment: environment
        )
        try environment.credentialStore.save(credentials, for: target)
        try CLIConfiguration(instance: target.description, userName: user).save(to: environment.configDirectory)
        warnAboutSavedPassword(environment)
        environment.print("Logged in to \(target) as \(me["name"] ?? user) (\(user)).")
    }

    private func warnAboutSavedPassword(_ environment: CLIEnvironment) {
        if savePassword {
            environment.err("docket: warning: your password is saved in the credential store; anyone who can read it can log in as you.\n")
        }
    }

    /// Logs in to Compass and returns what to keep: the token (the password only with `savePassword`).
    static func logIn(
        _ target: Instance, repository: String, database: String, user: String, password: String, savePassword: Bool,
        environment: CLIEnvironment
    ) async throws -> Credentials {
        let session = DocketSession(
            instance: target,
            credentials: .compass(repository: repository, database: database, userName: user, password: password),
            transport: environment.transport
        )
        // The repository's databases: the login itself, and a check that the database exists.
        let databases = try await DocketClient(session: session).compass.databases()
        guard databases.contains(where: { $0.name.caseInsensitiveCompare(database) == .orderedSame }) else {
            throw CLIFailure(
                "\(repository) has no database \(database); it has: " + databases.map(\.name).joined(separator: ", ")
            )
        }
        if savePassword { return .compass(repository: repository, database: database, userName: user, password: password) }
        guard let token = await session.compassLoginToken else { throw CLIFailure("the Compass login returned no token") }
        return .compassToken(repository: repository, database: database, userName: user, token: token)
    }

    /// Logs in and returns what to keep: a refresh token from the OAuth client (the given one, or docketd's),
    /// else the session cookies of a Basic login; the password itself only with `savePassword`.
    static func logIn(
        _ target: Instance, user: String, password: String, client: (id: String, secret: String)?, savePassword: Bool,
        environment: CLIEnvironment
    ) async throws -> (Credentials, TableRecord) {
        let oauthClient = client ?? (defaultClientID, defaultClientSecret)
        let oauth = DocketSession(
            instance: target,
            credentials: .oauth(clientID: oauthClient.id, clientSecret: oauthClient.secret, userName: user, password: password),
            transport: environment.transport
        )
        do {
            let me = try await WhoAmICommand.lookUp(user, client: DocketClient(session: oauth))
            if savePassword {
                return (.oauth(clientID: oauthClient.id, clientSecret: oauthClient.secret, userName: user, password: password), me)
            }
            if let refresh = await oauth.refreshToken {
                return (.refreshToken(clientID: oauthClient.id, clientSecret: oauthClient.secret, userName: user, refreshToken: refresh), me)
            }
        } catch let error as DocketError where client == nil && error.kind == .http && error.status == 401 {
            // No docket-cli client here (a ServiceNow instance), or a wrong password: a Basic login tells which.
        }
        let basic = DocketSession(instance: target, credentials: .basic(userName: user, password: password), transport: environment.transport)
        let me = try await WhoAmICommand.lookUp(user, client: DocketClient(session: basic))
        if savePassword { return (.basic(userName: user, password: password), me) }
        let cookies = await basic.sessionCookies
        guard !cookies.isEmpty else {
            throw CLIFailure("\(target) offers neither an OAuth client nor a session cookie: log in with --save-password or --client-id")
        }
        return (.sessionCookies(userName: user, cookies: cookies), me)
    }
}

struct LogoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout", abstract: "End the login on the instance and forget it here."
    )

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let environment = CLIEnvironment.current
        guard let name = connection.instance ?? CLIConfiguration.load(from: environment.configDirectory)?.instance else {
            throw CLIFailure("not logged in")
        }
        let target = try Instance(name)
        if let credentials = try environment.credentialStore.credentials(for: target) {
            // Revokes the refresh token or ends the session at /logout.do; a password login has nothing to end.
            await DocketSession(instance: target, credentials: credentials, transport: environment.transport).logout()
        }
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
        if case .eto(let login) = client.session.credentials {
            return CLIEnvironment.current.print("\(login.email) on \(client.session.instance) (ETO)")
        }
        if let compass = client.session.credentials.compassDatabase {
            let user = client.session.credentials.userName
            _ = try await client.compass.databases()  // the login still holds
            if output.json {
                return CLIEnvironment.current.print(WorkOutput.text(JSONValue(members: [
                    ("user_name", .string(user)), ("repository", .string(compass.repository)),
                    ("database", .string(compass.database)),
                ])))
            }
            return CLIEnvironment.current.print("\(user) on \(client.session.instance) (Compass \(compass.repository)/\(compass.database))")
        }
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
