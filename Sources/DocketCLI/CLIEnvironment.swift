import DocketKit
import Foundation

/// Everything a command touches outside itself, so tests can run commands in-process.
public struct CLIEnvironment: Sendable {
    /// Writes to standard output.
    public var out: @Sendable (String) -> Void
    /// Writes to standard error.
    public var err: @Sendable (String) -> Void
    /// Reads one line of standard input (for `--password-stdin`).
    public var readLine: @Sendable () -> String?
    /// Asks for a password without echo.
    public var readPassword: @Sendable (String) -> String?
    /// Whether standard error is a terminal (progress is shown only then).
    public var stderrIsTerminal: Bool
    /// Folder of `config.json`.
    public var configDirectory: URL
    /// Folder of the offline copies (one SQLite file per login): `$XDG_DATA_HOME/docket`, else
    /// `~/.local/share/docket`.
    public var dataDirectory: URL
    public var credentialStore: any CredentialStore
    public var transport: any Transport
    /// Opens an address in the user's browser; false when there is none to open it (the address is printed anyway).
    public var openInBrowser: @Sendable (URL) -> Bool = CLIEnvironment.systemBrowser

    /// The standard folder of offline copies.
    public static func defaultDataDirectory() -> URL {
        let variables = ProcessInfo.processInfo.environment
        if let xdg = variables["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            return URL(fileURLWithPath: xdg).appendingPathComponent("docket")
        }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share/docket")
    }

    /// The environment of a real run: the process's streams, `~/.config/docket`, the platform store.
    public static func standard() -> CLIEnvironment {
        var environment = CLIEnvironment(
            out: { text in FileHandle.standardOutput.write(Data(text.utf8)) },
            err: { text in FileHandle.standardError.write(Data(text.utf8)) },
            readLine: { Swift.readLine(strippingNewline: true) },
            readPassword: { prompt in Terminal.readPassword(prompt: prompt) },
            stderrIsTerminal: isatty(2) == 1,
            configDirectory: FileCredentialStore.defaultDirectory(),
            credentialStore: defaultCredentialStore(),
            transport: URLSessionTransport()
        )
        environment.dataDirectory = defaultDataDirectory()
        return environment
    }

    /// Opens an address with the desktop's opener (`open` on macOS, `xdg-open` elsewhere); false without one.
    public static let systemBrowser: @Sendable (URL) -> Bool = { url in
        #if os(macOS)
            let opener = "/usr/bin/open"
        #else
            let candidates = ["/usr/bin/xdg-open", "/usr/local/bin/xdg-open"]
            guard let opener = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return false }
        #endif
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
            return false
        #else
            let process = Process()
            process.executableURL = URL(fileURLWithPath: opener)
            process.arguments = [url.absoluteString]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            do {
                try process.run()
                return true
            } catch {
                return false
            }
        #endif
    }

    /// Creates an environment.
    public init(
        out: @escaping @Sendable (String) -> Void, err: @escaping @Sendable (String) -> Void,
        readLine: @escaping @Sendable () -> String?, readPassword: @escaping @Sendable (String) -> String?,
        stderrIsTerminal: Bool, configDirectory: URL, credentialStore: any CredentialStore, transport: any Transport
    ) {
        self.out = out
        self.err = err
        self.readLine = readLine
        self.readPassword = readPassword
        self.stderrIsTerminal = stderrIsTerminal
        self.configDirectory = configDirectory
        dataDirectory = configDirectory.appendingPathComponent("data")
        self.credentialStore = credentialStore
        self.transport = transport
    }

    @TaskLocal static var current = CLIEnvironment.standard()

    func print(_ text: String) { out(text + "\n") }

    /// The certificate authority to trust besides the system's: `--ca-file`, else `DOCKET_CA_FILE`, else the one
    /// `docket login --ca-file` saved; nil for the system's store alone.
    func caFile(option: String?) -> String? {
        if let option, !option.isEmpty { return option }
        if let variable = ProcessInfo.processInfo.environment["DOCKET_CA_FILE"], !variable.isEmpty { return variable }
        return CLIConfiguration.load(from: configDirectory)?.caFile
    }

    /// The trusted certificates of ``caFile(option:)``, read and checked.
    func trustedCertificates(option: String?) throws -> TrustedCertificates? {
        guard let path = caFile(option: option) else { return nil }
        do {
            return try TrustedCertificates(pemFile: path)
        } catch let error as DocketError {
            throw CLIFailure("\(error.message) (--ca-file or DOCKET_CA_FILE)")
        }
    }

    /// The transport for every request, trusting ``caFile(option:)`` too.
    func transport(caFile option: String?) throws -> any Transport {
        guard let trusted = try trustedCertificates(option: option) else { return transport }
        return try Transports.platform(trusting: trusted)
    }
}

/// A failure the CLI reports as one line on stderr with exit code 1.
struct CLIFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Turning off echo for password prompts.
enum Terminal {
    static func readPassword(prompt: String) -> String? {
        FileHandle.standardError.write(Data(prompt.utf8))
        var original = termios()
        let isTerminal = tcgetattr(0, &original) == 0
        if isTerminal {
            var silent = original
            silent.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(0, TCSAFLUSH, &silent)
        }
        defer {
            if isTerminal {
                tcsetattr(0, TCSAFLUSH, &original)
                FileHandle.standardError.write(Data("\n".utf8))
            }
        }
        return Swift.readLine(strippingNewline: true)
    }
}
