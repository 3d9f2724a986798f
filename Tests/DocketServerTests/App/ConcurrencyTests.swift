import DocketModel
import Foundation
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import DocketServer

/// Many clients at once against a live docketd on a loopback port: every write's answer is its committed
/// row, nothing that committed is reported missing, and concurrent updates of one record are all counted.
@Suite("Concurrent clients")
struct ConcurrencyTests {
    private struct Outcome: Sendable {
        var status: Int
        var body: JSONValue
    }

    private static func call(
        _ session: URLSession, _ base: String, _ method: String, _ path: String, user: String, body: String? = nil
    ) async throws -> Outcome {
        var request = URLRequest(url: URL(string: base + path)!)
        request.httpMethod = method
        request.setValue("Basic " + Data("\(user):\(user == "admin" ? "admin" : "password")".utf8).base64EncodedString(),
                         forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await session.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        return Outcome(status: status, body: data.isEmpty ? .null : (try? JSONValue.parse(data)) ?? .null)
    }

    @Test("creates, updates and lists at once: every 201/200 is the committed record, counts add up")
    func mixedLoad() async throws {
        let directory = TemporaryDirectory()
        let port = PortBox()
        var configuration = try await TestApp.demoConfiguration(dataDirectory: directory.path)
        configuration.logLevel = .error
        let app = try await buildApplication(configuration) { channel in port.set(channel.localAddress?.port) }
        try await app.test(.live) { _ in
            let base = "http://127.0.0.1:\(try #require(port.value))"
            let session = URLSession(configuration: .ephemeral)
            let target = Demo.incident1
            let (creators, perCreator, patchers, perPatcher, listers) = (8, 12, 4, 10, 4)
            let results = try await withThrowingTaskGroup(of: [String].self) { group in
                for worker in 0..<creators {
                    group.addTask {
                        var problems: [String] = []
                        for index in 0..<perCreator {
                            let text = "load \(worker)-\(index)"
                            let created = try await Self.call(
                                session, base, "POST", "/api/now/table/incident?sysparm_display_value=all", user: "john.doe",
                                body: #"{"short_description":"\#(text)","caller_id":"abel.tuter"}"#
                            )
                            let value = created.body["result"]?["short_description"]?["value"]?.stringValue
                            if created.status != 201 || value != text { problems.append("create \(created.status) \(String(describing: value))") }
                        }
                        return problems
                    }
                }
                for worker in 0..<patchers {
                    group.addTask {
                        var problems: [String] = []
                        for index in 0..<perPatcher {
                            let text = "patched \(worker)-\(index)"
                            let patched = try await Self.call(
                                session, base, "PATCH", "/api/now/table/incident/\(target)", user: "admin",
                                body: #"{"description":"\#(text)"}"#
                            )
                            if patched.status != 200 || patched.body["result"]?["description"]?.stringValue != text {
                                problems.append("patch \(patched.status)")
                            }
                        }
                        return problems
                    }
                }
                for _ in 0..<listers {
                    group.addTask {
                        var problems: [String] = []
                        for _ in 0..<10 {
                            let listed = try await Self.call(
                                session, base, "GET", "/api/now/table/incident?sysparm_display_value=all&sysparm_limit=50",
                                user: "beth.anglin"
                            )
                            if listed.status != 200 { problems.append("list \(listed.status)") }
                        }
                        return problems
                    }
                }
                var all: [String] = []
                for try await problems in group { all += problems }
                return all
            }
            #expect(results.isEmpty, "\(results.prefix(10))")
            let created = try await Self.call(
                session, base, "GET", "/api/now/table/incident?sysparm_query=short_descriptionSTARTSWITHload&sysparm_limit=1000",
                user: "admin"
            )
            #expect(created.body["result"]?.arrayValue?.count == creators * perCreator)
            let record = try await Self.call(session, base, "GET", "/api/now/table/incident/\(target)", user: "admin")
            let before = 0  // the demo incident has not been updated before this test
            #expect(Int(record.body["result"]?["sys_mod_count"]?.stringValue ?? "") == before + patchers * perPatcher)
        }
    }
}

/// The live server's port, set once it listens.
final class PortBox: Sendable {
    private let box = Mutex<Int?>(nil)
    func set(_ port: Int?) { box.withLock { $0 = port } }
    var value: Int? { box.withLock { $0 } }
}
