import DocketKit
import DocketModel
import DocketTestSupport
import Foundation
import Synchronization
import Testing

/// The SSE reader on its own.
@Suite("Server-Sent Events parser")
struct ServerSentEventParserTests {
    @Test("messages, names, ids, comments and multi-line data, however the bytes are split")
    func parses() {
        let stream = "retry: 2000\r\nevent: ready\r\nid: 7\r\ndata: {\"sequence\":7}\r\n\r\n: heartbeat\n\nid: 8\ndata: line one\ndata:line two\n\nevent: nothing\n\nid: 9\rdata: cr only\r\r"
        let bytes = Array(stream.utf8)
        // Every split point gives the same messages (CRLF split across chunks included).
        for split in 0...bytes.count {
            var parser = ServerSentEventParser()
            let events = parser.feed(bytes[..<split]) + parser.feed(bytes[split...])
            #expect(events == [
                ServerSentEvent(event: "ready", id: "7", data: "{\"sequence\":7}", retry: 2000),
                ServerSentEvent(id: "8", data: "line one\nline two"),
                ServerSentEvent(id: "9", data: "cr only"),
            ], "split at \(split)")
        }
    }

    @Test("the standard's corner cases: byte order mark, data-less messages, NUL ids, empty ids, retry digits, fields without a colon")
    func cornerCases() {
        func parse(_ text: String, _ prefix: [UInt8] = []) -> ([ServerSentEvent], ServerSentEventParser) {
            var parser = ServerSentEventParser()
            let bytes = prefix + Array(text.utf8)
            var events: [ServerSentEvent] = []
            for byte in bytes { events += parser.feed([byte]) }
            return (events, parser)
        }
        // A byte order mark at the start is skipped, even split byte by byte; anywhere else it is data.
        #expect(parse("data: a\n\n", [0xEF, 0xBB, 0xBF]).0 == [ServerSentEvent(data: "a")])
        #expect(parse("data: \u{FEFF}a\n\n").0 == [ServerSentEvent(data: "\u{FEFF}a")])
        // Only a whole mark is skipped: a lone EF begins the first line (which is then no known field).
        #expect(parse("data: a\n\n", [0xEF]).0.isEmpty)
        // Comments only, an event name or id without data, and a stream that ends inside a message: nothing.
        #expect(parse(":one\n:two\r\n\n").0.isEmpty)
        #expect(parse("event: custom\n\nid: 5\n\n").0.isEmpty)
        #expect(parse("id: 5\n\n").1.lastEventID == "5")
        // `data` with no value, or alone without a colon, is an empty line of data.
        #expect(parse("data\n\ndata:\ndata:\n\n").0 == [ServerSentEvent(data: ""), ServerSentEvent(data: "\n")])
        // Only one space after the colon is dropped.
        #expect(parse("data:  two\n\n").0 == [ServerSentEvent(data: " two")])
        // An id with NUL is ignored; an empty id clears the last one.
        let (ids, parser) = parse("id: 1\ndata: a\n\nid: x\u{0}y\ndata: b\n\nid\ndata: c\n\n")
        #expect(ids.map(\.id) == ["1", "1", ""])
        #expect(parser.lastEventID == "")
        // `retry` is taken only when it is all digits.
        let retries = parse("retry: 10\ndata: a\n\nretry: -5\ndata: b\n\nretry: +5\ndata: c\n\nretry: 1e3\ndata: d\n\nretry:\ndata: e\n\n").0
        #expect(retries.map(\.retry) == [10, nil, nil, nil, nil])
        // Unknown fields are ignored; field names are case-sensitive.
        #expect(parse("Data: x\nfoo: y\ndata: z\n\n").0 == [ServerSentEvent(data: "z")])
    }

    @Test("the last id carries over to messages without one; an incomplete message is not dispatched")
    func idsCarryOver() {
        var parser = ServerSentEventParser()
        let events = parser.feed(Array("id: 3\ndata: a\n\ndata: b\n\ndata: unfinished\n".utf8))
        #expect(events.map(\.id) == ["3", "3"])
        #expect(events.map(\.data) == ["a", "b"])
        #expect(parser.lastEventID == "3")
    }
}

/// The transports `LiveUpdates` is tested over.
enum LiveTransportKind: String, CaseIterable, Sendable {
    case serverSentEvents, webSocket

    var transport: LiveUpdates.Transport { self == .webSocket ? .webSocket : .serverSentEvents }
}

/// `LiveUpdates` against a live docketd, over each transport.
@Suite("DocketKit live updates")
struct LiveUpdatesTests {
    func client(_ base: String, _ user: String = "john.doe", _ password: String = "password") throws -> DocketClient {
        try DocketClient(instance: base, credentials: .basic(userName: user, password: password))
    }

    /// Reads `count` changes from an iterator in a task.
    static func take(
        _ count: Int, from updates: LiveUpdates, counting seen: Counter? = nil
    ) -> Task<([RecordChange], Int?), any Error> {
        Task {
            var iterator = updates.makeAsyncIterator()
            var changes: [RecordChange] = []
            while changes.count < count, let change = try await iterator.next() {
                changes.append(change)
                seen?.value.withLock { $0 += 1 }
            }
            return (changes, iterator.position)
        }
    }

    @Test(
        "create, update, reassign away and delete arrive as entered, changed, left; another user's stream sees only theirs",
        .timeLimit(.minutes(3)), arguments: LiveTransportKind.allCases
    )
    func follows(_ kind: LiveTransportKind) async throws {
        try await withLiveServer { base throws in
            let john = try client(base)
            let admin = try client(base, "admin", "admin")
            let johnID = try await john.table.records(in: "sys_user", query: .where("user_name", .equals, "john.doe")).records[0].sysID
            // From the start of the log (so the test does not race the connection), narrowed by a query.
            let mine = john.liveUpdates(
                table: "incident", query: "assigned_to=javascript:gs.getUserID()^short_descriptionSTARTSWITHlive-1", since: 0,
                transport: kind.transport
            )
            let johnChanges = Self.take(3, from: mine)
            let abelChanges = Self.take(
                1, from: try client(base, "abel.tuter", "password").liveUpdates(
                    table: "incident", query: "short_descriptionSTARTSWITHlive-1", since: 0, transport: kind.transport
                )
            )
            let created = try await admin.table.createRecord(
                with: ["short_description": "live-1 for john", "assigned_to": johnID], in: "incident"
            )
            _ = try await admin.table.updateRecord(created.sysID, in: "incident", with: ["urgency": "1"])
            _ = try await admin.table.updateRecord(created.sysID, in: "incident", with: ["assigned_to": ""])
            // Abel's own incident: the only change his stream may show.
            let abelID = try await admin.table.records(in: "sys_user", query: .where("user_name", .equals, "abel.tuter")).records[0].sysID
            let abels = try await admin.table.createRecord(with: ["short_description": "live-1 abel's", "caller_id": abelID], in: "incident")
            let (changes, position) = try await johnChanges.value
            #expect(changes.map(\.kind) == [.entered, .changed, .left])
            #expect(changes.allSatisfy { $0.sysID == created.sysID && $0.table == "incident" && $0.user == "admin" })
            #expect(changes[0]["short_description"] == "live-1 for john")
            #expect(changes[1].previous["urgency"] != nil && changes[1]["urgency"] == "1")
            #expect(position == changes.last?.sequence)
            let (abelSaw, _) = try await abelChanges.value
            #expect(abelSaw.map(\.sysID) == [abels.sysID])
            #expect(abelSaw.first?.kind == .entered)
        }
    }

    @Test(
        "a follower that stops and comes back with its position gets what happened meanwhile, once",
        .timeLimit(.minutes(3)), arguments: LiveTransportKind.allCases
    )
    func resumes(_ kind: LiveTransportKind) async throws {
        try await withLiveServer { base throws in
            let admin = try client(base, "admin", "admin")
            let first = Self.take(1, from: admin.liveUpdates(
                table: "incident", query: "short_descriptionSTARTSWITHresume-", since: 0, transport: kind.transport
            ))
            var ids: [String] = []
            for index in 0..<4 {
                ids.append(try await admin.table.createRecord(with: ["short_description": "resume-\(index)"], in: "incident").sysID)
            }
            let (seen, position) = try await first.value
            #expect(seen.map(\.sysID) == [ids[0]])
            let rest = Self.take(3, from: admin.liveUpdates(
                table: "incident", query: "short_descriptionSTARTSWITHresume-", since: position, transport: kind.transport
            ))
            let (later, _) = try await rest.value
            #expect(later.map(\.sysID) == Array(ids.dropFirst()))
        }
    }

    @Test(
        "a follower survives a restart of the instance and misses nothing written while it was down",
        .timeLimit(.minutes(4)), arguments: LiveTransportKind.allCases
    )
    func survivesRestart(_ kind: LiveTransportKind) async throws {
        let consumer = Mutex<Task<([RecordChange], Int?), any Error>?>(nil)
        let written = Mutex<[String]>([])
        let updatesSeen = Counter()
        try await withRestartingLiveServer(heartbeat: .milliseconds(200)) { base in
            let admin = try client(base, "admin", "admin")
            let updates = LiveUpdates(
                session: admin.session, table: "incident", query: "short_descriptionSTARTSWITHrestart-", since: 0,
                reconnect: .init(initialDelay: .milliseconds(100), maximumDelay: .seconds(1)), transport: kind.transport
            )
            consumer.withLock { $0 = Self.take(3, from: updates, counting: updatesSeen) }
            let id = try await admin.table.createRecord(with: ["short_description": "restart-before"], in: "incident").sysID
            written.withLock { $0.append(id) }
            // Wait until the follower has it, so that the restart happens while it is connected.
            while updatesSeen.value.withLock({ $0 }) < 1 { try await Task.sleep(for: .milliseconds(20)) }
        } second: { base in
            let admin = try client(base, "admin", "admin")
            for label in ["restart-after-1", "restart-after-2"] {
                let id = try await admin.table.createRecord(with: ["short_description": label], in: "incident").sysID
                written.withLock { $0.append(id) }
            }
            let task = try #require(consumer.withLock { $0 })
            let (changes, _) = try await task.value
            #expect(changes.map(\.sysID) == written.withLock { $0 })
            #expect(changes.map(\.kind) == [.entered, .entered, .entered])
        }
    }

    @Test("an unknown table is refused, not retried", arguments: LiveTransportKind.allCases)
    func refused(_ kind: LiveTransportKind) async throws {
        try await withLiveServer { base throws in
            var iterator = try client(base).liveUpdates(table: "no_such_table", transport: kind.transport).makeAsyncIterator()
            do {
                _ = try await iterator.next()
                Issue.record("an unknown table was followed")
            } catch let error as DocketError {
                if kind == .serverSentEvents {
                    #expect(error.status == 400)
                } else {
                    #expect(error.kind == .invalidRequest && error.message.contains("no_such_table"))
                }
            }
        }
    }

    @Test("a WebSocket follower whose session ends logs in again and misses nothing", .timeLimit(.minutes(3)))
    func webSocketLogsInAgain() async throws {
        try await withLiveServer(heartbeat: .milliseconds(200)) { base throws in
            let admin = try client(base, "admin", "admin")
            let updates = LiveUpdates(
                session: admin.session, table: "incident", query: "short_descriptionSTARTSWITHrelogin-", since: 0,
                reconnect: .init(initialDelay: .milliseconds(50), maximumDelay: .milliseconds(200)), transport: .webSocket
            )
            let seen = Counter()
            let changes = Self.take(2, from: updates, counting: seen)
            let first = try await admin.table.createRecord(with: ["short_description": "relogin-1"], in: "incident").sysID
            while seen.value.withLock({ $0 }) < 1 { try await Task.sleep(for: .milliseconds(20)) }
            // Every session of admin ends (a new password ends them; the same password keeps logins working).
            let adminID = try await admin.table.records(in: "sys_user", query: .where("user_name", .equals, "admin")).records[0].sysID
            _ = try await admin.table.updateRecord(adminID, in: "sys_user", with: ["user_password": "admin"])
            let second = try await admin.table.createRecord(with: ["short_description": "relogin-2"], in: "incident").sysID
            let (got, _) = try await changes.value
            #expect(got.map(\.sysID) == [first, second])
        }
    }
}

final class Counter: Sendable {
    let value = Mutex(0)
}

/// `GraphQLService` against a live docketd.
@Suite("DocketKit GraphQL")
struct GraphQLServiceTests {
    @Test("execute returns the raw answer, or decodes data; errors in the answer are thrown; other endpoints work too")
    func execute() async throws {
        try await withLiveServer { base throws in
            let client = try DocketClient(instance: base, credentials: .basic(userName: "john.doe", password: "password"))
            let raw = try await client.graphQL.execute(
                #"{ GlideRecord_Query { kb_knowledge(queryConditions: "active=true^ORDERBYpublishedDESC" pagination: { limit: 10, offset: 0 }) { _results { sys_id { value }, number { displayValue } } } } }"#
            )
            #expect(String(decoding: raw, as: UTF8.self).contains("KB00100"))
            struct Answer: Decodable {
                struct Query: Decodable { let incident: Results }
                struct Results: Decodable { let _rowCount: Int }
                let GlideRecord_Query: Query
            }
            let count = try await client.graphQL.execute(
                "query ($qc: String!) { GlideRecord_Query { incident(queryConditions: $qc) { _rowCount } } }",
                variables: ["qc": .string("number=INC0010001")], as: Answer.self
            )
            #expect(count.GlideRecord_Query.incident._rowCount == 1)
            do {
                _ = try await client.graphQL.execute("{ GlideRecord_Query { nope } }", as: Answer.self)
                Issue.record("an answer with errors was decoded")
            } catch let error as DocketError {
                #expect(error.message.contains("nope"))
            }
            // The DataSync endpoint, through the same session.
            struct Tasks: Decodable {
                struct Task: Decodable { let id: String; let title: String; let version: Int }
                let allTasks: [Task]
            }
            let tasks = try await GraphQLService(session: client.session, path: "/graphql")
                .execute("query allTasks { allTasks { id title version } }", operationName: "allTasks", as: Tasks.self)
            #expect(tasks.allTasks.contains { $0.title == "Order office supplies" && $0.version == 1 })
        }
    }
}
