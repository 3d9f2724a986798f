import ArgumentParser
import DocketKit
import Foundation

/// What `docket login` remembers besides the secret: which instance and user (`config.json`).
struct CLIConfiguration: Codable {
    var instance: String
    var userName: String

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
        return DocketClient(session: DocketSession(instance: target, credentials: credentials, transport: environment.transport))
    }
}


/// Output options of the read commands.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print JSON for scripts instead of text.")
    var json = false
}
