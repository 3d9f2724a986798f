import DocketKit
import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing

@testable import DocketServer

/// One GraphQL socket to a live test server, read a message at a time.
struct TestSocket {
    let connection: any WebSocketConnection

    static func open(
        _ port: Int, _ path: String = "/api/now/graphql", subprotocol: String = "graphql-transport-ws",
        headers: [String: String] = [:]
    ) async throws -> TestSocket {
        let url = URL(string: "ws://127.0.0.1:\(port)\(path)")!
        return TestSocket(connection: try await NIOWebSocketConnector().connect(to: url, subprotocol: subprotocol, headers: headers))
    }

    static let johnBasic = "Basic " + Data("john.doe:password".utf8).base64EncodedString()

    func send(_ text: String) async throws { try await connection.send(text) }

    func send(_ message: JSONValue) async throws {
        try await connection.send(String(decoding: message.serialized(), as: UTF8.self))
    }

    /// The next message that is not a keep-alive; nil when the socket closed.
    func receive() async throws -> JSONValue? {
        while let text = try await connection.receive() {
            let message = try JSONValue.parse(Array(text.utf8))
            if message["type"]?.stringValue == "ka" { continue }
            return message
        }
        return nil
    }

    /// Reads until the socket closes; its close code.
    func closeCode() async throws -> Int? {
        while try await connection.receive() != nil {}
        return await connection.closeCode
    }

    /// `connection_init` with `Authorization` in the payload; expects the acknowledgement.
    func initialize(_ authorization: String = johnBasic) async throws {
        try await send(JSONValue(members: [
            ("type", .string("connection_init")), ("payload", .object(["Authorization": .string(authorization)])),
        ]))
        let ack = try await receive()
        #expect(ack?["type"]?.stringValue == "connection_ack")
    }

    func subscribe(_ id: String, _ query: String, variables: JSONValue = .object([:]), legacy: Bool = false) async throws {
        try await send(JSONValue(members: [
            ("type", .string(legacy ? "start" : "subscribe")), ("id", .string(id)),
            ("payload", .object(["query": .string(query), "variables": variables])),
        ]))
    }
}

/// GraphQL over WebSocket (`graphql-transport-ws` and the legacy `graphql-ws`) on `/api/now/graphql` and
/// `/graphql`: the protocols' rules, authentication, access and many subscribers under concurrent writes.
@Suite("GraphQL sockets")
struct GraphQLSocketTests {
    /// Runs `test` against a live demo server; its port.
    static func withServer<T: Sendable>(
        configure: (inout Configuration) -> Void = { _ in }, _ test: @Sendable (any TestClientProtocol, Int) async throws -> T
    ) async throws -> T {
        let directory = TemporaryDirectory()
        var configuration = try await TestApp.demoConfiguration(dataDirectory: directory.path)
        configure(&configuration)
        let app = try await buildApplication(configuration)
        return try await app.test(.live) { client in
            try await test(client, try #require(client.port))
        }
    }

    static let incidents = "subscription ($q: String, $since: Long) { incident(queryConditions: $q, since: $since) { sequence change operation sys_id record { number { value } short_description { value displayValue } caller_id { value displayValue } } previous { short_description { value } } } }"

    @Test("protocol violations close the socket with the spec's codes", .timeLimit(.minutes(3)))
    func protocolViolations() async throws {
        try await Self.withServer(configure: { $0.liveSocketInitTimeout = .seconds(2) }) { _, port in
            // Not JSON, or no type.
            for text in ["not json", #"{"id":"1"}"#, #"{"type":"launch"}"#] {
                let socket = try await TestSocket.open(port)
                try await socket.send(text)
                #expect(try await socket.closeCode() == 4400, "\(text)")
            }
            // An operation before connection_init is acknowledged.
            var socket = try await TestSocket.open(port)
            try await socket.subscribe("1", "{ __typename }")
            #expect(try await socket.closeCode() == 4401)
            // A second connection_init.
            socket = try await TestSocket.open(port)
            try await socket.initialize()
            try await socket.send(#"{"type":"connection_init"}"#)
            #expect(try await socket.closeCode() == 4429)
            // Two running operations with one id.
            socket = try await TestSocket.open(port)
            try await socket.initialize()
            try await socket.subscribe("same", Self.incidents)
            try await socket.subscribe("same", Self.incidents)
            #expect(try await socket.closeCode() == 4409)
            // No connection_init in time.
            socket = try await TestSocket.open(port)
            #expect(try await socket.closeCode() == 4408)
            // A subprotocol docketd does not speak: upgraded, then closed with 4406 at once. Read off the wire: the
            // client library can lose a frame that arrives together with the upgrade's answer.
            let upgrade = "GET /api/now/graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: chat\r\n\r\n"
            let (wire, _) = try await ConnectionGuardTests.exchangeBytes(port, Array(upgrade.utf8), limit: .seconds(3))
            let head = String(decoding: wire, as: UTF8.self)
            #expect(head.hasPrefix("HTTP/1.1 101"))
            let body = wire.split(separator: 0x0A, omittingEmptySubsequences: false).last.map(Array.init) ?? []
            // A close frame (0x88) whose payload starts with the code, big-endian.
            #expect(body.count >= 4 && body[0] == 0x88 && Int(body[2]) << 8 | Int(body[3]) == 4406, "\(body.prefix(8))")
            // An operation without an id or a payload.
            socket = try await TestSocket.open(port)
            try await socket.initialize()
            try await socket.send(#"{"type":"subscribe","payload":{"query":"{ __typename }"}}"#)
            #expect(try await socket.closeCode() == 4400)
        }
    }

    @Test(
        "credentials: connection_init's payload (either spelling), the upgrade's headers; wrong ones are refused with 4403",
        .timeLimit(.minutes(3))
    )
    func authentication() async throws {
        try await Self.withServer { client, port in
            let token = try await client.passwordGrant().string("access_token")
            for (path, payload) in [
                ("/graphql", #"{"type":"connection_init","payload":{"Authorization":"Bearer \#(token)"}}"#),
                ("/graphql", #"{"type":"connection_init","payload":{"authorization":"Bearer \#(token)"}}"#),
                ("/api/now/graphql", #"{"type":"connection_init","payload":{"headers":{"Authorization":"\#(TestSocket.johnBasic)"}}}"#),
            ] {
                let socket = try await TestSocket.open(port, path)
                try await socket.send(payload)
                #expect(try await socket.receive()?["type"]?.stringValue == "connection_ack", "\(payload)")
                await socket.connection.close()
            }
            // The upgrade request's Authorization header, with an empty init.
            var socket = try await TestSocket.open(port, "/graphql", headers: ["Authorization": "Bearer " + token])
            try await socket.send(#"{"type":"connection_init"}"#)
            #expect(try await socket.receive()?["type"]?.stringValue == "connection_ack")
            await socket.connection.close()
            // A session cookie works on /api/now/graphql, but not from another site's page.
            let cookie = try await LiveEventsTests.sessionCookie(client)
            socket = try await TestSocket.open(port, headers: ["Cookie": cookie])
            try await socket.send(#"{"type":"connection_init"}"#)
            #expect(try await socket.receive()?["type"]?.stringValue == "connection_ack")
            await socket.connection.close()
            socket = try await TestSocket.open(port, headers: ["Cookie": cookie, "Origin": "https://elsewhere.example"])
            try await socket.send(#"{"type":"connection_init"}"#)
            #expect(try await socket.closeCode() == 4403)
            // DataSync takes no session cookie.
            socket = try await TestSocket.open(port, "/graphql", headers: ["Cookie": cookie])
            try await socket.send(#"{"type":"connection_init"}"#)
            #expect(try await socket.closeCode() == 4403)
            // Nothing, a wrong password, an unknown token, an unknown scheme.
            for payload in [
                #"{"type":"connection_init","payload":{}}"#,
                #"{"type":"connection_init","payload":{"Authorization":"Basic \#(Data("john.doe:wrong".utf8).base64EncodedString())"}}"#,
                #"{"type":"connection_init","payload":{"Authorization":"Bearer nope"}}"#,
                #"{"type":"connection_init","payload":{"Authorization":"Digest x"}}"#,
                #"{"type":"connection_init","payload":"Bearer x"}"#,
            ] {
                socket = try await TestSocket.open(port, "/graphql")
                try await socket.send(payload)
                #expect(try await socket.closeCode() == 4403, "\(payload)")
            }
            // The legacy protocol is told why before the close.
            socket = try await TestSocket.open(port, "/graphql", subprotocol: "graphql-ws")
            try await socket.send(#"{"type":"connection_init","payload":{"Authorization":"Bearer nope"}}"#)
            let refusal = try await socket.receive()
            #expect(refusal?["type"]?.stringValue == "connection_error")
            #expect(try await socket.closeCode() == 4403)
        }
    }

    @Test("a subscriber sees only the records it may read, with display values; entered, changed, deleted", .timeLimit(.minutes(3)))
    func access() async throws {
        try await Self.withServer { client, port in
            let abel = try await TestSocket.open(port)
            try await abel.initialize("Basic " + Data("abel.tuter:password".utf8).base64EncodedString())
            // From the log's start, narrowed to this test's records: nothing written below can be missed, however
            // late the subscription starts to follow.
            try await abel.subscribe(
                "mine", Self.incidents, variables: .object(["q": .string("short_descriptionSTARTSWITHsock-access"), "since": .integer(0)])
            )
            _ = try await client.send(
                .post, "/api/now/table/incident", json: #"{"short_description":"sock-access other"}"#, headers: .admin
            )
            let mine = try await client.send(
                .post, "/api/now/table/incident",
                json: #"{"short_description":"sock-access his","caller_id":"\#(Callers.abel.userID)"}"#, headers: .admin
            ).result.string("sys_id")
            _ = try await client.send(
                .patch, "/api/now/table/incident/\(mine)", json: #"{"short_description":"sock-access his, changed"}"#, headers: .admin
            )
            _ = try await client.execute(uri: "/api/now/table/incident/\(mine)", method: .delete, headers: .admin, body: nil)
            var seen: [JSONValue] = []
            while seen.count < 3, let message = try await abel.receive() {
                #expect(message["type"]?.stringValue == "next")
                #expect(message["id"]?.stringValue == "mine")
                if let change = message["payload"]?["data"]?["incident"] { seen.append(change) }
            }
            #expect(seen.map { $0["change"]?.stringValue } == ["entered", "changed", "deleted"])
            // Ended early (the socket closed): what was seen is reported above, without a crash.
            try #require(seen.count == 3)
            #expect(seen.allSatisfy { $0["sys_id"]?.stringValue == mine })
            #expect(seen[0]["record"]?["caller_id"]?["displayValue"]?.stringValue == "Abel Tuter")
            #expect(seen[1]["previous"]?["short_description"]?["value"]?.stringValue == "sock-access his")
            #expect(seen[2]["record"]?["short_description"]?["value"]?.stringValue == "sock-access his, changed")
            // Stopping ends the subscription; the socket stays usable for queries.
            try await abel.send(#"{"type":"complete","id":"mine"}"#)
            try await abel.subscribe("q", "{ GlideRecord_Query { incident(queryConditions: \"caller_id=\(Callers.abel.userID)\") { _rowCount } } }")
            let answer = try await abel.receive()
            #expect(answer?["type"]?.stringValue == "next")
            #expect(answer?["payload"]?["data"]?["GlideRecord_Query"]?["incident"]?["_rowCount"]?.intValue != nil)
            #expect(try await abel.receive()?["type"]?.stringValue == "complete")
        }
    }

    @Test(
        "refused operations: bad documents, arguments and queries are errors of that operation, not of the socket",
        .timeLimit(.minutes(3))
    )
    func refusals() async throws {
        try await Self.withServer { client, port in
            let socket = try await TestSocket.open(port)
            try await socket.initialize()
            for (id, document, variables) in [
                ("syntax", "subscription { incident(", JSONValue.object([:])),
                ("field", "subscription { incident { nope } }", .object([:])),
                ("table", "subscription { no_such_table { sequence } }", .object([:])),
                ("query", Self.incidents, .object(["q": .string("priority=1^NQ" + String(repeating: "^active=true", count: 300))])),
                ("since", Self.incidents, .object(["since": .integer(-4)])),
                ("two", "subscription { incident { sequence } problem { sequence } }", .object([:])),
            ] {
                try await socket.subscribe(id, document, variables: variables)
                let answer = try await socket.receive()
                #expect(answer?["type"]?.stringValue == "error", "\(id)")
                #expect(answer?["id"]?.stringValue == id)
                #expect(answer?["payload"]?.arrayValue?.first?["message"]?.stringValue?.isEmpty == false, "\(id)")
            }
            // The legacy protocol answers errors as data, then complete.
            let legacy = try await TestSocket.open(port, "/graphql", subprotocol: "graphql-ws")
            try await legacy.initialize()
            try await legacy.subscribe("bad", "subscription { taskGone { id } }", legacy: true)
            let data = try await legacy.receive()
            #expect(data?["type"]?.stringValue == "data")
            #expect(data?["payload"]?["errors"]?.arrayValue?.isEmpty == false)
            #expect(try await legacy.receive()?["type"]?.stringValue == "complete")
            // Over HTTP, subscriptions are refused with directions.
            for (path, field) in [("/api/now/graphql", "incident { sequence }"), ("/graphql", "taskAdded { id }")] {
                let answer = try await client.send(.post, path, json: #"{"query":"subscription { \#(field) }"}"#)
                #expect(String(buffer: answer.body).contains("WebSocket"), "\(path)")
            }
        }
    }

    @Test("a token revoked while its socket is open closes the socket with 4403", .timeLimit(.minutes(3)))
    func revocation() async throws {
        try await Self.withServer(configure: { $0.liveHeartbeat = .milliseconds(200) }) { client, port in
            let token = try await client.passwordGrant().string("access_token")
            let socket = try await TestSocket.open(port, "/graphql")
            try await socket.initialize("Bearer " + token)
            try await socket.subscribe("1", "subscription { taskAdded { id } }")
            _ = try await client.form("/oauth_revoke_token.do", "token=\(token)")
            #expect(try await socket.closeCode() == 4403)
        }
    }

    @Test("many subscribers on both protocols each receive every change of concurrent writers, in order, once", .timeLimit(.minutes(4)))
    func concurrentWriters() async throws {
        try await Self.withServer(configure: { $0.liveStreamsPerUser = 100 }) { client, port in
            let writers = 4
            let perWriter = 15
            let total = writers * perWriter
            var sockets: [TestSocket] = []
            for index in 0..<12 {
                let legacy = index % 2 == 1
                let socket = try await TestSocket.open(port, "/graphql", subprotocol: legacy ? "graphql-ws" : "graphql-transport-ws")
                try await socket.initialize()
                try await socket.subscribe("added", "subscription { taskAdded { id title version } }", legacy: legacy)
                sockets.append(socket)
            }
            // Readers start now. Marker tasks are written until every socket has seen one, so every subscription
            // follows before the writers start (however long starting one takes); markers are not counted.
            let following = Following()
            let readers = sockets.enumerated().map { index, socket in
                Task { () -> [String] in
                    var titles: [String] = []
                    while titles.count < total, let message = try await socket.receive() {
                        guard let title = message["payload"]?["data"]?["taskAdded"]?["title"]?.stringValue else { continue }
                        if title.hasPrefix("ready-") {
                            _ = following.sockets.withLock { $0.insert(index) }
                        } else {
                            titles.append(title)
                        }
                    }
                    return titles
                }
            }
            var marker = 0
            while following.sockets.withLock({ $0.count }) < sockets.count {
                let answer = try await client.send(
                    .post, "/graphql", json: #"{"query":"mutation { createTask(title: \"ready-\#(marker)\", description: \"c\") { id } }"}"#,
                    headers: .john
                )
                #expect(answer.status == .ok)
                marker += 1
                try await Task.sleep(for: .milliseconds(50))
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        for index in 0..<perWriter {
                            let answer = try await client.send(
                                .post, "/graphql", json: #"{"query":"mutation { createTask(title: \"w\#(writer)-\#(index)\", description: \"c\") { id } }"}"#,
                                headers: .john
                            )
                            #expect(answer.status == .ok)
                        }
                    }
                }
                try await group.waitForAll()
            }
            var orders: [[String]] = []
            for reader in readers { orders.append(try await reader.value) }
            #expect(orders.count == sockets.count)
            // Everyone saw every task once, in the same (commit) order, and each writer's tasks in its order.
            #expect(orders.allSatisfy { $0 == orders[0] })
            #expect(Set(orders[0]).count == total)
            for writer in 0..<writers {
                #expect(orders[0].filter { $0.hasPrefix("w\(writer)-") } == (0..<perWriter).map { "w\(writer)-\($0)" })
            }
        }
    }
}

/// The sockets whose subscriptions have been seen to follow (see ``GraphQLSocketTests/concurrentWriters()``).
private final class Following: Sendable {
    let sockets = Mutex(Set<Int>())
}
