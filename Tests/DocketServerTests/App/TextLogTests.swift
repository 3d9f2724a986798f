import Foundation
import Logging
import Synchronization
import Testing

@testable import DocketServer

/// The text log line (`--log-format text`) and the batched writes of ``LogOutput``.
@Suite("Text log lines")
struct TextLogTests {
    @Test("a line is swift-log's text line with the request id named request_id, keys in order")
    func lineFormat() throws {
        let lines = Mutex<[String]>([])
        var handler = TextLogHandler(label: "docketd") { bytes in lines.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) } }
        handler[metadataKey: RequestIDs.metadataKey] = "abc123"
        let logger = Logger(label: "docketd", factory: { _ in handler })
        logger.info("request", metadata: ["status": .stringConvertible(200), "method": "GET"])
        logger.error("Request failed", error: CocoaError(.fileNoSuchFile))
        logger.debug("below the level")
        let written = lines.withLock { $0 }
        #expect(written.count == 2)
        let first = try #require(written.first)
        #expect(first.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} info docketd: method=GET request_id=abc123 status=200 \[DocketServerTests\] request\n/) != nil, "\(first)")
        #expect(written.last?.contains("error.type=") == true)
    }

    @Test("a request's line written from its fields is the line logging it with that metadata gives")
    func requestLine() throws {
        let lines = Mutex<[String]>([])
        var handler = TextLogHandler(label: "docketd") { bytes in lines.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) } }
        handler[metadataKey: RequestIDs.metadataKey] = "abc123"
        handler[metadataKey: "trace_id"] = "t1"
        handler[metadataKey: "user"] = "replaced by the line's own"
        let fields: [(key: String, value: String)] = [
            ("method", "GET"), ("path", "/api/now/table/incident"), ("route", "/api/now/table/{table}"), ("dialect", "servicenow"),
            ("status", "200"), ("duration_ms", "0.412"), ("user", "john.doe"),
        ]
        #expect(handler.logRequest(fields, source: "DocketServer"))
        let logger = Logger(label: "docketd", factory: { _ in handler })
        logger.info("request", metadata: Logger.Metadata(uniqueKeysWithValues: fields.map { ($0.key, .string($0.value)) }), source: "DocketServer")
        let written = lines.withLock { $0 }
        #expect(written.count == 2)
        // The same text but for the time, which may have moved on by a second.
        let withoutTime = written.map { $0.drop { $0 != " " } }
        #expect(withoutTime[0] == withoutTime[1])
        #expect(withoutTime[0].hasSuffix(
            " info docketd: dialect=servicenow duration_ms=0.412 method=GET path=/api/now/table/incident request_id=abc123"
                + " route=/api/now/table/{table} status=200 trace_id=t1 user=john.doe [DocketServer] request\n"
        ), "\(withoutTime[0])")

        // A metadata provider's fields are the provider's to give: that line goes the usual way.
        handler.metadataProvider = Logger.MetadataProvider { ["tenant": "a"] }
        #expect(!handler.logRequest(fields, source: "DocketServer"))
        #expect(lines.withLock { $0.count } == 2)
    }

    @Test("lines written at once from many tasks reach the descriptor whole, each once", .timeLimit(.minutes(1)))
    func batchedWrites() async throws {
        var descriptors: [Int32] = [0, 0]
        #expect(pipe(&descriptors) == 0)
        let output = LogOutput(descriptor: descriptors[1])
        let readEnd = descriptors[0]
        // The reader is a thread of its own: writers block while the pipe is full, and a reader waiting for a
        // thread of the pool they hold would never come.
        let received = Mutex<[String]?>(nil)
        let reader = Thread {
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var newlines = 0
            while newlines < 4_000 {
                let count = read(readEnd, &buffer, buffer.count)
                guard count > 0 else { break }
                bytes.append(contentsOf: buffer.prefix(count))
                newlines += buffer.prefix(count).count(where: { $0 == UInt8(ascii: "\n") })
            }
            received.withLock { $0 = String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init) }
        }
        reader.start()
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<500 {
                        // Most below warning (written by the output's thread), some at warning (by their callers).
                        output.line(Array("line \(task)-\(index) \(String(repeating: "x", count: 40))\n".utf8), level: index % 50 == 0 ? .warning : .info)
                    }
                }
            }
        }
        // No flush: the output's thread writes what is left by itself.
        var lines: [String] = []
        while true {
            if let done = received.withLock({ $0 }) {
                lines = done
                break
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        // Every line was read: nothing writes to the pipe any more.
        close(descriptors[0])
        close(descriptors[1])
        #expect(lines.count == 4_000)
        #expect(Set(lines).count == 4_000)
        #expect(lines.allSatisfy { $0.hasPrefix("line ") && $0.hasSuffix(String(repeating: "x", count: 40)) })
        // Each task's lines in the order it logged them.
        for task in 0..<8 {
            let indexes = lines.filter { $0.hasPrefix("line \(task)-") }.compactMap { Int($0.dropFirst("line \(task)-".count).prefix { $0 != " " }) }
            #expect(indexes == Array(0..<500))
        }
    }

    @Test("a warning is written at once, after the lines logged before it; an info line follows by itself", .timeLimit(.minutes(1)))
    func warningsAtOnce() async throws {
        var descriptors: [Int32] = [0, 0]
        #expect(pipe(&descriptors) == 0)
        defer { close(descriptors[0]) }
        let output = LogOutput(descriptor: descriptors[1])
        let flags = fcntl(descriptors[0], F_GETFL)
        #expect(fcntl(descriptors[0], F_SETFL, flags | O_NONBLOCK) == 0)
        func available() -> String {
            var buffer = [UInt8](repeating: 0, count: 4_096)
            let count = read(descriptors[0], &buffer, buffer.count)
            return count > 0 ? String(decoding: buffer.prefix(count), as: UTF8.self) : ""
        }

        // Nobody writes on a fresh output: a warning is in the pipe when its call returns.
        output.line(Array("zero\n".utf8), level: .warning)
        #expect(available() == "zero\n")

        output.line(Array("first\n".utf8), level: .info)
        output.line(Array("second\n".utf8), level: .warning)
        // Both are in the pipe already, in order, unless the output's thread was writing "first" when "second" came
        // (a stalled test thread): it then takes "second" next, without waiting.
        var both = available()
        while !both.hasSuffix("second\n") {
            both += available()
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(both == "first\nsecond\n")

        // An info line alone is written by the output's thread: poll until it shows.
        output.line(Array("third\n".utf8), level: .info)
        var seen = ""
        while !seen.hasSuffix("third\n") {
            seen += available()
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(seen == "third\n")
        close(descriptors[1])
    }

    @Test("flush gives up when nobody reads: a stalled log reader cannot hold the process's exit", .timeLimit(.minutes(1)))
    func flushWithStalledReader() async throws {
        var descriptors: [Int32] = [0, 0]
        #expect(pipe(&descriptors) == 0)
        // Neither end is closed: the output's thread may stay in a write to this pipe for the rest of the process,
        // and its descriptor must not be reused by another test meanwhile.
        let output = LogOutput(descriptor: descriptors[1])
        let line = Array((String(repeating: "x", count: 1_023) + "\n").utf8)
        // Four times what a pipe holds, and nobody reads.
        for _ in 0..<256 { output.line(line, level: .info) }
        // On a thread of its own, so that a flush that never returned would fail this test at its time limit
        // instead of holding a thread of the shared pool.
        let returned = Mutex(false)
        Thread {
            output.flush()
            returned.withLock { $0 = true }
        }.start()
        while !returned.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        // Reaching this line is the test: flush returned although standard error took nothing more.
        var readable = pollfd(fd: descriptors[0], events: Int16(POLLIN), revents: 0)
        #expect(poll(&readable, 1, 0) == 1)
    }
}
