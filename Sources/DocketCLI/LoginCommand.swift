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
            password is only used to log in: docket keeps an OAuth refresh token (docketd offers the docket-cli \
            client; give --client-id and --client-secret for an instance's own), or else the session cookie, and asks \
            for the password again when that expires. --save-password keeps the password itself instead, for \
            unattended scripts; anyone who can read the credential store can then log in as you.

            INSTANCE is a URL (http://127.0.0.1:8080, https://docket.example.com) or a ServiceNow instance name \
            (acme for https://acme.service-now.com); a host without a scheme means https://. A docketd serving TLS \
            with a certificate of your own CA: give the CA with --ca-file (it is saved, for later commands).

            With --repo and --db, docket logs in to the Compass (Traxiem) REST API of that repository and database \
            instead (docketd serves SampleRepository/SAMPL): it keeps the Compass token (24 hours), and the work \
            commands (defects, show, create, edit, transition, delete, choices, watch --mine) speak Compass.

            With --sso, docket signs in through docketd's OpenID provider instead (the device grant): it prints an \
            address and a code, you allow the sign-in in a browser on any device (signed in to Docket there), and \
            docket keeps the refresh token it is given, renewing it as the provider rotates it. With --sso --browser \
            the sign-in happens in this machine's browser instead, which comes back to docket on a loopback address. \
            'docket logout' revokes the token.

            One login is kept at a time: logging in again, to another instance or to Compass or ETO on the same \
            docketd, replaces the earlier login.
            """
    )

    static let defaultClientID = "docket-cli"
    static let defaultClientSecret = "docket-cli"

    @Argument(help: "Instance name (acme) or URL (http://127.0.0.1:8080).")
    var instance: String

    @Option(help: "User name (not with --sso).")
    var user: String?

    @Flag(help: "Sign in through docketd's OpenID provider on any device with a browser (the device grant): docket prints an address and a code to enter there, then keeps only the tokens.")
    var sso = false

    @Option(help: "The OpenID realm to sign in to with --sso (default docket).")
    var realm: String = "docket"

    @Flag(help: "With --sso: sign in in this machine's browser (it comes back to docket on a loopback address) instead of entering a code on any device.")
    var browser = false

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

    @Option(
        name: .customLong("ca-file"),
        help: "PEM file of a certificate authority to trust besides the system's (a self-hosted docketd's); saved with the login. Also DOCKET_CA_FILE."
    )
    var caFile: String?

    func validate() throws {
        if browser, !sso { throw ValidationError("--browser goes with --sso") }
        if sso {
            if user != nil || repo != nil || db != nil || eto || savePassword || passwordStdin {
                throw ValidationError("--sso signs in through the browser: leave out --user, --repo, --db, --eto, --save-password and --password-stdin")
            }
            return
        }
        if user == nil { throw ValidationError("give --user NAME (or sign in through the browser with --sso)") }
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
        let transport = try environment.transport(caFile: caFile)
        let trusted = environment.caFile(option: caFile).map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        if sso {
            do {
                return try await signInThroughBrowser(target, transport: transport, trusted: trusted, environment: environment)
            } catch let error as DocketError {
                throw Self.explain(error, target: target, typed: instance)
            }
        }
        let user = self.user ?? ""
        let password = passwordStdin ? environment.readLine() : environment.readPassword("Password for \(user): ")
        guard let password, !password.isEmpty else {
            throw CLIFailure(
                passwordStdin
                    ? "no password given: --password-stdin reads it from the first line of standard input"
                    : "no password given. Without a terminal to type it in, pipe it in with --password-stdin "
                        + "(printf '%s\\n' \"$PASSWORD\" | docket login \(instance) --user \(user) --password-stdin), or sign in "
                        + "in a browser with --sso"
            )
        }
        do {
            try await logIn(target, password: password, transport: transport, trusted: trusted, environment: environment)
        } catch let error as DocketError {
            throw Self.explain(error, target: target, typed: instance)
        }
    }

    /// The device grant (RFC 8628) against the instance's OpenID realm: shows where to go and which code to
    /// enter, waits for the person to allow it there, and keeps the refresh token (no password ever typed here).
    private func signInThroughBrowser(_ target: Instance, transport: any Transport, trusted: String?, environment: CLIEnvironment) async throws {
        let oidc = OpenIDClient(transport: transport)
        let issuer = target.baseURL.appendingPathComponent("realms").appendingPathComponent(realm)
        let provider: OpenIDConfiguration
        do {
            provider = try await oidc.discover(issuer: issuer)
        } catch let error as DocketError where error.kind == .http && error.status == 404 {
            throw CLIFailure("\(target) has no OpenID realm '\(realm)' (\(issuer.absoluteString)): is it a docketd? Give the realm with --realm")
        }
        let client = clientID ?? Self.defaultClientID
        let secret = clientID == nil ? Self.defaultClientSecret : clientSecret
        let tokens: OpenIDTokens
        if browser {
            let loopback = try await LoopbackRedirect.start()
            let request = try oidc.authorizationRequest(provider, clientID: client, redirectURI: loopback.redirectURI)
            let opened = environment.openInBrowser(request.url)
            environment.print((opened ? "Your browser opens the sign-in; if it does not, open: " : "Open this address in a browser on this machine: ") + request.url.absoluteString)
            environment.print("Waiting for the sign-in to come back…")
            let path: String?
            do {
                path = try await loopback.callback(timeout: .seconds(600))
            } catch {
                await loopback.close()
                throw error
            }
            await loopback.close()
            guard let path, let callback = URL(string: "http://127.0.0.1:\(loopback.port)" + path) else {
                throw CLIFailure("the sign-in did not come back within 10 minutes: run 'docket login \(instance) --sso --browser' again")
            }
            tokens = try await oidc.finish(request, callback: callback, configuration: provider, clientID: client, clientSecret: secret)
        } else {
            let authorization = try await oidc.startDeviceAuthorization(provider, clientID: client, clientSecret: secret)
            environment.print("To sign in, open \(authorization.verificationURI) in a browser and enter the code \(authorization.userCode)")
            if let complete = authorization.verificationURIComplete { environment.print("(or open \(complete))") }
            environment.print("Waiting for you to allow it there…")
            tokens = try await oidc.pollDeviceToken(provider, authorization: authorization, clientID: client, clientSecret: secret)
        }
        let login: OpenIDLogin
        do {
            login = try OpenIDLogin(tokens: tokens, configuration: provider, clientID: client, clientSecret: secret)
        } catch let error as DocketError {
            throw CLIFailure(error.message)
        }
        let userName = login.userName
        try environment.credentialStore.save(.openID(login), for: target)
        try CLIConfiguration(instance: target.description, userName: userName, caFile: trusted).save(to: environment.configDirectory)
        environment.print("Signed in to \(target) as \(userName).")
    }

    private func logIn(
        _ target: Instance, password: String, transport: any Transport, trusted: String?, environment: CLIEnvironment
    ) async throws {
        let user = self.user ?? ""
        if eto {
            let client = DocketClient(session: DocketSession(
                instance: target, credentials: .eto(ETOLogin(email: user)), transport: transport
            ))
            try await client.eto.signIn(email: user, password: password)
            guard let login = await client.session.etoLogin else { throw CLIFailure("the ETO sign-in returned no token") }
            try environment.credentialStore.save(.eto(login), for: target)
            try CLIConfiguration(instance: target.description, userName: user, caFile: trusted).save(to: environment.configDirectory)
            return environment.print("Signed in to \(target) as \(user) (ETO). Choose where to work with 'docket context'.")
        }
        if let repo, let db {
            let credentials = try await Self.logIn(
                target, repository: repo, database: db, user: user, password: password, savePassword: savePassword,
                transport: transport
            )
            try environment.credentialStore.save(credentials, for: target)
            try CLIConfiguration(instance: target.description, userName: user, repository: repo, database: db, caFile: trusted)
                .save(to: environment.configDirectory)
            warnAboutSavedPassword(environment)
            return environment.print("Logged in to \(target) as \(user) (Compass \(repo)/\(db)).")
        }
        let (credentials, me) = try await Self.logIn(
            target, user: user, password: password, client: clientID.map { ($0, clientSecret ?? "") },
            savePassword: savePassword, transport: transport
        )
        try environment.credentialStore.save(credentials, for: target)
        try CLIConfiguration(instance: target.description, userName: user, caFile: trusted).save(to: environment.configDirectory)
        warnAboutSavedPassword(environment)
        environment.print("Logged in to \(target) as \(me["name"] ?? user) (\(user)).")
    }

    /// A failed login in words that name the fix: a URL without a scheme that meant plain HTTP, a certificate of
    /// a private CA, an address where no instance answers.
    static func explain(_ error: DocketError, target: Instance, typed: String) -> any Error {
        let detail = error.detail ?? ""
        if error.kind == .transport {
            if !typed.contains("://"), target.baseURL.scheme == "https" {
                return CLIFailure(
                    "cannot reach \(target) (\(detail)). Without a scheme, \(typed) means https://; if the server does not "
                        + "serve TLS (docketd without --tls-cert), log in to http://\(typed)"
                )
            }
            if detail.lowercased().contains("certificate") || detail.lowercased().contains("ssl") {
                return CLIFailure(
                    "cannot reach \(target): its certificate is not trusted (\(detail)). For a docketd with a certificate of "
                        + "your own CA, give the CA with --ca-file (or DOCKET_CA_FILE)"
                )
            }
            return error
        }
        if error.kind == .decoding || (error.kind == .http && [404, 405].contains(error.status ?? 0)) {
            let path = target.baseURL.path
            return CLIFailure(
                "no Docket or ServiceNow instance answers at \(target): its Table API (\(path)/api/now/table) "
                    + (error.kind == .decoding ? "did not answer in JSON" : "answered \(error.status ?? 0)")
                    + ". Give the instance's address without a path, such as \(target.baseURL.scheme ?? "https")://"
                    + "\(target.baseURL.host ?? "host")\(target.baseURL.port.map { ":\($0)" } ?? "")"
            )
        }
        return error
    }

    private func warnAboutSavedPassword(_ environment: CLIEnvironment) {
        if savePassword {
            environment.err("docket: warning: your password is saved in the credential store; anyone who can read it can log in as you.\n")
        }
    }

    /// Logs in to Compass and returns what to keep: the token (the password only with `savePassword`).
    static func logIn(
        _ target: Instance, repository: String, database: String, user: String, password: String, savePassword: Bool,
        transport: any Transport
    ) async throws -> Credentials {
        let session = DocketSession(
            instance: target,
            credentials: .compass(repository: repository, database: database, userName: user, password: password),
            transport: transport, retryPolicy: noRetries
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

    /// Logins are reported, not retried: a throttled one says how long to wait.
    static let noRetries = DocketSession.RetryPolicy(maximumRetries: 0)

    /// Logs in and returns what to keep: a refresh token from the OAuth client (the given one, or docketd's),
    /// else the session cookies of a Basic login; the password itself only with `savePassword`.
    ///
    /// Without `client`, the password is checked once, by a Basic login: a wrong one is one failed login (the
    /// OAuth error of an instance does not tell a wrong password from an unknown client). Then docketd's
    /// command-line client turns it into a refresh token; where there is none (a ServiceNow instance), the session
    /// cookies are kept.
    static func logIn(
        _ target: Instance, user: String, password: String, client: (id: String, secret: String)?, savePassword: Bool,
        transport: any Transport
    ) async throws -> (Credentials, TableRecord) {
        if let client {
            let oauth = DocketSession(
                instance: target,
                credentials: .oauth(clientID: client.id, clientSecret: client.secret, userName: user, password: password),
                transport: transport, retryPolicy: noRetries
            )
            let me = try await WhoAmICommand.lookUp(user, client: DocketClient(session: oauth))
            if savePassword { return (.oauth(clientID: client.id, clientSecret: client.secret, userName: user, password: password), me) }
            guard let refresh = await oauth.refreshToken else {
                throw CLIFailure("the OAuth client \(client.id) gave no refresh token: log in with --save-password instead")
            }
            return (.refreshToken(clientID: client.id, clientSecret: client.secret, userName: user, refreshToken: refresh), me)
        }
        let basic = DocketSession(
            instance: target, credentials: .basic(userName: user, password: password), transport: transport,
            retryPolicy: noRetries
        )
        let me = try await WhoAmICommand.lookUp(user, client: DocketClient(session: basic))
        if savePassword { return (.basic(userName: user, password: password), me) }
        let oauth = DocketSession(
            instance: target,
            credentials: .oauth(clientID: defaultClientID, clientSecret: defaultClientSecret, userName: user, password: password),
            transport: transport, retryPolicy: noRetries
        )
        do {
            _ = try await oauth.send("GET", "/api/now/table/sys_user", query: [("sysparm_limit", "1"), ("sysparm_fields", "sys_id")])
            if let refresh = await oauth.refreshToken {
                // The Basic login's session is not needed any more.
                await basic.logout()
                return (.refreshToken(clientID: defaultClientID, clientSecret: defaultClientSecret, userName: user, refreshToken: refresh), me)
            }
        } catch let error as DocketError where error.kind == .http && error.status == 401 {
            // No docket-cli client here (a ServiceNow instance): the session cookies are what there is to keep.
        }
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
        var outcome = DocketSession.LogoutOutcome.ended
        if let credentials = try environment.credentialStore.credentials(for: target) {
            // Revokes the refresh token or ends the session at /logout.do; a password login has nothing to end.
            outcome = await DocketSession(instance: target, credentials: credentials, transport: try connection.transport()).logout()
        }
        try environment.credentialStore.delete(for: target)
        try? FileManager.default.removeItem(at: CLIConfiguration.url(in: environment.configDirectory))
        switch outcome {
        case .ended:
            environment.print("Logged out of \(target).")
        case .notConfirmed(let reason):
            // Forgotten here either way; the exit status and the message say that the instance may still honour it.
            throw CLIFailure(
                "the login to \(target) is forgotten here, but the instance did not confirm its end (\(reason)); "
                    + "it stays valid there until it expires"
            )
        }
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
