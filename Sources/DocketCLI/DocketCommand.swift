import ArgumentParser
import DocketKit
import DocketModel
import Foundation

/// The `docket` command.
public struct DocketCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "docket",
        abstract: "Your work in a ServiceNow-compatible tracker (docketd or a real instance), from the terminal.",
        discussion: """
            Start with 'docket login INSTANCE --user NAME'. INSTANCE is a URL (http://127.0.0.1:8080) or a
            ServiceNow instance name (acme → https://acme.service-now.com). Add --repo and --db to log in to a
            Compass (Traxiem) repository instead; defects, show, comment, create, edit, transition, delete, choices
            and watch --mine then speak Compass. With --eto (and an e-mail address as --user) it signs in to ETO:
            choose where to work with 'docket context', then use participants, participant, touchpoint, and show,
            create and edit on participants. Read commands take --json for scripts.
            Exit codes: 0 success, 1 failure, 2 wrong usage.
            """,
        version: DocketVersion.current,
        subcommands: [
            LoginCommand.self, LogoutCommand.self, WhoAmICommand.self, TasksCommand.self, ShowCommand.self,
            CommentCommand.self, RecordsCommand.self, WatchCommand.self, DefectsCommand.self, CreateCommand.self,
            EditCommand.self, TransitionCommand.self, DeleteCommand.self, ChoicesCommand.self, ContextCommand.self, ParticipantsCommand.self,
            ParticipantCommand.self, TouchPointCommand.self, NotificationsCommand.self, NotifyCommand.self, SyncCommand.self,
            ConflictsCommand.self, ResolveCommand.self, QueueCommand.self,
        ]
    )

    public init() {}

    /// Runs the command line and returns the exit code (0, 1, or 2 for usage errors).
    public static func run(_ arguments: [String], environment: CLIEnvironment = .standard()) async -> Int32 {
        await CLIEnvironment.$current.withValue(environment) {
            let command: any ParsableCommand
            do {
                command = try parseAsRoot(arguments)
            } catch {
                let code = exitCode(for: error)
                let message = fullMessage(for: error)
                if code == .success {
                    environment.out(message + "\n")
                    return 0
                }
                environment.err(message + "\n")
                return 2
            }
            func runCommand() async throws {
                if var command = command as? any AsyncParsableCommand {
                    try await command.run()
                } else {
                    var command = command
                    try command.run()
                }
            }
            do {
                do {
                    try await runCommand()
                } catch let error as DocketError where error.kind == .loginExpired {
                    // The saved login ran out: ask for the password again (on a terminal) and run the command again.
                    guard try await logInAgain(environment) else { throw error }
                    try await runCommand()
                }
                return 0
            } catch let error as DocketError where error.kind == .loginExpired {
                environment.err("docket: your saved login has expired or was ended: run 'docket login' again\n")
                return 1
            } catch let error as CLIFailure {
                environment.err("docket: \(error.description)\n")
                return 1
            } catch let error as DocketError {
                environment.err("docket: \(error.description)\n")
                return 1
            } catch {
                // ArgumentParser's own outcomes: help (CleanExit) and validation failures.
                switch exitCode(for: error) {
                case .success:
                    environment.out(fullMessage(for: error) + "\n")
                    return 0
                case .validationFailure:
                    environment.err(fullMessage(for: error) + "\n")
                    return 2
                default:
                    environment.err("docket: \(error)\n")
                    return 1
                }
            }
        }
    }

    /// Asks for the password of the saved user and logs in again the way it was saved; false when there is no
    /// saved login or nobody to ask.
    private static func logInAgain(_ environment: CLIEnvironment) async throws -> Bool {
        guard let saved = CLIConfiguration.load(from: environment.configDirectory), let target = try? Instance(saved.instance),
            let old = try environment.credentialStore.credentials(for: target)
        else { return false }
        if case .openID = old {
            // A browser sign-in is renewed in the browser: no password is asked for here.
            environment.err("docket: your sign-in to \(target) has ended; sign in again with 'docket login \(saved.instance) --sso'\n")
            return false
        }
        guard let password = environment.readPassword("Your login to \(target) has expired. Password for \(saved.userName): "),
            !password.isEmpty
        else { return false }
        if case .eto = old {
            let client = DocketClient(session: DocketSession(
                instance: target, credentials: .eto(ETOLogin(email: saved.userName)), transport: try environment.transport(caFile: nil)
            ))
            try await client.eto.signIn(email: saved.userName, password: password)
            guard let login = await client.session.etoLogin else { return false }
            try environment.credentialStore.save(.eto(login), for: target)
            environment.err("docket: signed in again; choose where to work with 'docket context'\n")
            return false
        }
        if let compass = old.compassDatabase {
            let credentials = try await LoginCommand.logIn(
                target, repository: compass.repository, database: compass.database, user: saved.userName,
                password: password, savePassword: false, transport: try environment.transport(caFile: nil)
            )
            try environment.credentialStore.save(credentials, for: target)
            return true
        }
        var client: (id: String, secret: String)? = nil
        if case .refreshToken(let id, let secret, _, _) = old { client = (id, secret) }
        let (credentials, _) = try await LoginCommand.logIn(
            target, user: saved.userName, password: password, client: client, savePassword: false, transport: try environment.transport(caFile: nil)
        )
        try environment.credentialStore.save(credentials, for: target)
        return true
    }
}
