import DocketServer
import Foundation
import HummingbirdTesting
import Synchronization

/// Runs a docketd with demo data on a free loopback port for the duration of `body`.
public func withLiveServer<T: Sendable>(_ body: @Sendable (_ baseURL: String) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docket-live-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let port = Mutex<Int?>(nil)
    let configuration = Configuration(
        host: "127.0.0.1", port: 0, dataDirectory: directory.path, demo: true, logLevel: .warning, bcryptCost: 4
    )
    let app = try await buildApplication(configuration) { channel in
        port.withLock { $0 = channel.localAddress?.port }
    }
    return try await app.test(.live) { _ in
        guard let port = port.withLock({ $0 }) else { throw LiveServerError.noPort }
        return try await body("http://127.0.0.1:\(port)")
    }
}

enum LiveServerError: Error { case noPort }

/// The demo's fixed sys_ids (see DemoData).
public enum Demo {
    public static let incident1 = "cdb04ffc53247d4908555def767adca7"
}
