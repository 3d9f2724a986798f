import ArgumentParser
import DocketKit
import Foundation

/// What `docket login` remembers besides the secret: which instance and user, and for a Compass login the
/// repository and database (`config.json`).
struct CLIConfiguration: Codable {
    var instance: String
    var userName: String
    var repository: String? = nil
    var database: String? = nil
    /// The certificate authority `docket login --ca-file` was given (an absolute path).
    var caFile: String? = nil

    static func url(in directory: URL) -> URL { directory.appendingPathComponent("config.json") }

    static func load(from directory: URL) -> CLIConfiguration? {
        guard let data = try? Data(contentsOf: url(in: directory)) else { return nil }
        return try? JSONDecoder().decode(CLIConfiguration.self, from: data)
    }

    func save(to directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try JSONEncoder().encode(self).write(to: Self.url(in: directory))
    }
}

/// Options every command that talks to an instance takes.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "Instance name or URL; defaults to the one saved by 'docket login'.")
    var instance: String?

    @Option(
        name: .customLong("ca-file"),
        help: "PEM file of a certificate authority to trust besides the system's, such as a self-hosted docketd's; also DOCKET_CA_FILE. Defaults to the one 'docket login --ca-file' saved."
    )
    var caFile: String?

    /// The transport every request of the command uses.
    func transport() throws -> any Transport { try CLIEnvironment.current.transport(caFile: caFile) }

    /// How live changes arrive: over Server-Sent Events, or a GraphQL WebSocket that trusts the same certificates.
    func liveTransport(webSocket: Bool) throws -> LiveUpdates.Transport {
        guard webSocket else { return .serverSentEvents }
        return .webSocket(using: WebSocketConnectors.platform(trusting: try CLIEnvironment.current.trustedCertificates(option: caFile)))
    }

    /// A client with the saved credentials of the chosen instance.
    func client() throws -> DocketClient {
        let environment = CLIEnvironment.current
        let saved = CLIConfiguration.load(from: environment.configDirectory)
        guard let name = instance ?? saved?.instance else {
            throw CLIFailure("not logged in: run 'docket login INSTANCE --user NAME' first")
        }
        let target = try Instance(name)
        guard let credentials = try environment.credentialStore.credentials(for: target) else {
            throw CLIFailure("no saved credentials for \(target): run 'docket login \(name) --user NAME'")
        }
        let store = environment.credentialStore
        let report = environment.err
        // An OpenID provider rotates refresh tokens: the new one is saved at once, or the next command's is spent.
        return DocketClient(session: DocketSession(
            instance: target, credentials: credentials, transport: try transport(),
            credentialsDidChange: { updated in
                do {
                    try store.save(updated, for: target)
                } catch {
                    report("docket: warning: the renewed sign-in could not be saved (\(error)); the next command will ask you to sign in again\n")
                }
            }
        ))
    }

    /// A client for a command that speaks the ServiceNow APIs only: a Compass login is told what to use instead.
    func serviceNowClient(_ command: String) throws -> DocketClient {
        let client = try client()
        if case .eto = client.session.credentials {
            throw CLIFailure("'docket \(command)' speaks the ServiceNow APIs, and you are signed in to ETO: use 'docket context'")
        }
        if let compass = client.session.credentials.compassDatabase {
            throw CLIFailure(
                "'docket \(command)' speaks the ServiceNow APIs, and you are logged in to Compass (\(compass.repository)/"
                    + "\(compass.database)): use 'docket defects', 'docket show', 'docket create', 'docket edit', 'docket transition'"
            )
        }
        return client
    }

    /// A client for a command that speaks ServiceNow or Compass (not ETO).
    func workClient(_ command: String) throws -> DocketClient {
        let client = try client()
        if case .eto = client.session.credentials {
            throw CLIFailure("'docket \(command)' needs a ServiceNow or Compass login; with ETO use 'docket context'")
        }
        return client
    }

    /// The work backend of the saved login: Compass or the ServiceNow Table API.
    func backend() throws -> (client: DocketClient, backend: any WorkBackend) {
        let client = try client()
        return (client, client.workBackend())
    }
}


/// Output options of the read commands.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print JSON for scripts instead of text.")
    var json = false
}
