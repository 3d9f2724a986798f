import DocketServer
import Foundation
import HummingbirdTesting
import Logging
import ServiceLifecycle
import Synchronization

/// Runs a docketd with demo data on a free loopback port for the duration of `body`; over TLS with a certificate of
/// `tls`' CA when given.
public func withLiveServer<T: Sendable>(
    heartbeat: Duration = .seconds(15), tls: TestCertificates? = nil, configure: (inout Configuration) -> Void = { _ in },
    _ body: @Sendable (_ baseURL: String) async throws -> T
) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docket-live-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let port = Mutex<Int?>(nil)
    var configuration = Configuration(
        host: "127.0.0.1", port: 0, dataDirectory: directory.path, demo: true, logLevel: .warning, bcryptCost: 4
    )
    configuration.liveHeartbeat = heartbeat
    SuiteLog.configure(&configuration)
    configuration.tlsCertificatePath = tls?.certificateFile
    configuration.tlsKeyPath = tls?.keyFile
    configure(&configuration)
    try await LiveTemplate.shared.copy(into: configuration)
    let app = try await buildApplication(configuration) { channel in
        port.withLock { $0 = channel.localAddress?.port }
    }
    return try await app.test(.live) { _ in
        guard let port = port.withLock({ $0 }) else { throw LiveServerError.noPort }
        return try await body("\(tls == nil ? "http" : "https")://127.0.0.1:\(port)")
    }
}

/// Runs docketd with demo data, runs `first`, stops it, starts it again on the same data folder and port, and
/// runs `second` (`between` runs while it is down): for clients that must survive a restart. (The test framework's live mode always picks a new
/// port, so the server runs in a service group of its own here.)
public func withRestartingLiveServer<T: Sendable>(
    heartbeat: Duration = .seconds(15),
    first: @Sendable (_ baseURL: String) async throws -> Void,
    between: @Sendable (_ baseURL: String) async throws -> Void = { _ in },
    second: @Sendable (_ baseURL: String) async throws -> T
) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docket-live-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    var configuration = Configuration(
        host: "127.0.0.1", port: 0, dataDirectory: directory.path, demo: true, logLevel: .warning, bcryptCost: 4
    )
    configuration.liveHeartbeat = heartbeat
    SuiteLog.configure(&configuration)
    try await LiveTemplate.shared.copy(into: configuration)
    let port = try await runServer(configuration) { port in
        try await first("http://127.0.0.1:\(port)")
        return port
    }
    configuration.port = port
    // While nothing listens on the port: clients see the server down (connections refused). The port is held, bound
    // but not listening, so that no other test's listener takes it meanwhile (one that never answers would make
    // clients hang instead of seeing a refusal).
    let hold = try PortHold(port)
    do {
        try await between("http://127.0.0.1:\(port)")
    } catch {
        hold.release()
        throw error
    }
    hold.release()
    return try await runServer(configuration) { _ in try await second("http://127.0.0.1:\(port)") }
}

/// Runs docketd with `configuration` until `body` returns, then shuts it down gracefully.
private func runServer<T: Sendable>(_ configuration: Configuration, _ body: @Sendable (Int) async throws -> T) async throws -> T {
    let (ports, reporter) = AsyncStream<Int>.makeStream()
    let app = try await buildApplication(configuration) { channel in reporter.yield(channel.localAddress?.port ?? 0) }
    let group = ServiceGroup(configuration: .init(services: [app], logger: Logger(label: "test")))
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else {
            await group.triggerGracefulShutdown()
            throw LiveServerError.noPort
        }
        do {
            let value = try await body(port)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return value
        } catch {
            await group.triggerGracefulShutdown()
            try? await tasks.waitForAll()
            throw error
        }
    }
}

/// A data folder with the demo seeded, made once per test process and copied for each live server: seeding the demo
/// and making an RSA signing key cost a debug build about half a second of a core each, and with dozens of live
/// servers starting together on two cores that left the tests' own timing to chance. (Each copy shares the
/// template's secrets and keys, as copies of one backup would.)
actor LiveTemplate {
    static let shared = LiveTemplate()
    private var built: Task<String, any Error>?

    /// Copies the template into `configuration`'s data folder, when the configuration serves the demo from the
    /// SQLite file of a folder that does not exist yet (otherwise the server seeds its own, as before).
    func copy(into configuration: Configuration) async throws {
        guard configuration.demo, configuration.database == nil, !FileManager.default.fileExists(atPath: configuration.dataDirectory)
        else { return }
        let template = try await folder()
        try FileManager.default.copyItem(atPath: template, toPath: configuration.dataDirectory)
    }

    private func folder() async throws -> String {
        if let built { return try await built.value }
        let task = Task { try await Self.build() }
        built = task
        return try await task.value
    }

    /// Starts docketd once on a new folder with the demo and stops it: its database is then closed, whole, in
    /// the folder.
    private static func build() async throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docket-live-template-\(UUID().uuidString)")
        var configuration = Configuration(
            host: "127.0.0.1", port: 0, dataDirectory: directory.path, demo: true, logLevel: .warning, bcryptCost: 4
        )
        SuiteLog.configure(&configuration)
        try await runServer(configuration) { _ in }
        return directory.path
    }
}

public enum LiveServerError: Error {
    case noPort
    case openssl(String)
}

/// The demo's fixed sys_ids (see DemoData).
public enum Demo {
    public static let incident1 = "cdb04ffc53247d4908555def767adca7"
}

/// A throw-away certificate authority and a server certificate it signed for 127.0.0.1 (made with openssl).
public struct TestCertificates: Sendable {
    public let folder: URL
    public var caFile: String { folder.appendingPathComponent("ca.pem").path }
    public var certificateFile: String { folder.appendingPathComponent("server.pem").path }
    public var keyFile: String { folder.appendingPathComponent("server.key").path }
    /// A client certificate the CA signed (`/CN=ansible`), and one nobody signed (`/CN=stranger`).
    public var clientCertificateFile: String { folder.appendingPathComponent("client.pem").path }
    public var clientKeyFile: String { folder.appendingPathComponent("client.key").path }
    public var strangerCertificateFile: String { folder.appendingPathComponent("stranger.pem").path }
    public var strangerKeyFile: String { folder.appendingPathComponent("stranger.key").path }

    /// Makes them in a new temporary folder (openssl runs without holding a thread of the test's pool).
    public static func make() async throws -> TestCertificates {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("docket-ca-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let certificates = TestCertificates(folder: folder)
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
            .write(to: folder.appendingPathComponent("ext.cnf"), atomically: true, encoding: .utf8)
        try "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n"
            .write(to: folder.appendingPathComponent("client.cnf"), atomically: true, encoding: .utf8)
        for arguments in [
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=Docket test CA", "-keyout", "ca.key", "-out", "ca.pem"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr"],
            ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
             "-extfile", "ext.cnf", "-out", "server.pem"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=ansible", "-keyout", "client.key", "-out", "client.csr"],
            ["x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
             "-extfile", "client.cnf", "-out", "client.pem"],
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=stranger", "-keyout", "stranger.key",
             "-out", "stranger.pem"],
        ] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["openssl"] + arguments
            process.currentDirectoryURL = folder
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            let status = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
                process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
                do { try process.run() } catch {
                    process.terminationHandler = nil
                    continuation.resume(throwing: error)
                }
            }
            guard status == 0 else { throw LiveServerError.openssl(arguments.first ?? "") }
        }
        return certificates
    }

    public func remove() { try? FileManager.default.removeItem(at: folder) }
}

/// A TCP port bound without listening: connecting to it is refused, and nothing else can bind it.
final class PortHold: Sendable {
    private let descriptor: Int32

    init(_ port: Int) throws {
        #if os(Linux)
            descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw LiveServerError.noPort }
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            close(descriptor)
            throw LiveServerError.noPort
        }
    }

    func release() { close(descriptor) }
}
