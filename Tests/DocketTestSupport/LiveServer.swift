import DocketServer
import Foundation
import HummingbirdTesting
import Logging
import ServiceLifecycle
import Synchronization

/// Runs a docketd with demo data on a free loopback port for the duration of `body`.
public func withLiveServer<T: Sendable>(
    heartbeat: Duration = .seconds(15), _ body: @Sendable (_ baseURL: String) async throws -> T
) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docket-live-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let port = Mutex<Int?>(nil)
    var configuration = Configuration(
        host: "127.0.0.1", port: 0, dataDirectory: directory.path, demo: true, logLevel: .warning, bcryptCost: 4
    )
    configuration.liveHeartbeat = heartbeat
    let app = try await buildApplication(configuration) { channel in
        port.withLock { $0 = channel.localAddress?.port }
    }
    return try await app.test(.live) { _ in
        guard let port = port.withLock({ $0 }) else { throw LiveServerError.noPort }
        return try await body("http://127.0.0.1:\(port)")
    }
}

/// Runs docketd with demo data, runs `first`, stops it, starts it again on the same data folder and port, and
/// runs `second`: for clients that must survive a restart. (The test framework's live mode always picks a new
/// port, so the server runs in a service group of its own here.)
public func withRestartingLiveServer<T: Sendable>(
    heartbeat: Duration = .seconds(15),
    first: @Sendable (_ baseURL: String) async throws -> Void,
    second: @Sendable (_ baseURL: String) async throws -> T
) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docket-live-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    var configuration = Configuration(
        host: "127.0.0.1", port: 0, dataDirectory: directory.path, demo: true, logLevel: .warning, bcryptCost: 4
    )
    configuration.liveHeartbeat = heartbeat
    let port = try await runServer(configuration) { port in
        try await first("http://127.0.0.1:\(port)")
        return port
    }
    configuration.port = port
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

enum LiveServerError: Error { case noPort }

/// The demo's fixed sys_ids (see DemoData).
public enum Demo {
    public static let incident1 = "cdb04ffc53247d4908555def767adca7"
}
