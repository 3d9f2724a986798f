import Foundation
import HummingbirdTesting
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import DocketServer

/// Raw connections to a live server: what the upgrade-capable HTTP/1.1 pipeline does with a first request head it
/// cannot parse or that never completes (Hummingbird's own handling starts only after the first head).
@Suite("Connection guards")
struct ConnectionGuardTests {
    /// Collects what the server sends until it closes the connection.
    final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let received = Mutex<[UInt8]>([])

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            received.withLock { $0 += buffer.readableBytesView }
        }
    }

    /// Sends `bytes` on a new connection; what came back once the server closed it (or `limit` passed), and
    /// whether it closed within the limit.
    static func exchange(_ port: Int, _ bytes: [UInt8], limit: Duration = .seconds(5)) async throws -> (String, closed: Bool) {
        let (received, closed) = try await exchangeBytes(port, bytes, limit: limit)
        return (String(decoding: received, as: UTF8.self), closed)
    }

    /// ``exchange(_:_:limit:)``'s bytes as they came.
    static func exchangeBytes(_ port: Int, _ bytes: [UInt8], limit: Duration = .seconds(5)) async throws -> ([UInt8], closed: Bool) {
        let collector = Collector()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector) }
            }
            .connect(host: "127.0.0.1", port: port).get()
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes))
        let closed = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await channel.closeFuture.get()
                return true
            }
            group.addTask {
                try await Task.sleep(for: limit)
                return false
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !closed { try? await channel.close() }
        return (Array(collector.received.withLock { $0 }), closed)
    }

    static func withServer(
        configure: (inout Configuration) -> Void = { _ in }, _ test: @Sendable (Int) async throws -> Void
    ) async throws {
        let directory = TemporaryDirectory()
        var configuration = try await TestApp.demoConfiguration(dataDirectory: directory.path)
        configuration.idleTimeout = .seconds(1)
        configure(&configuration)
        let app = try await buildApplication(configuration)
        try await app.test(.live) { client in try await test(try #require(client.port)) }
    }

    @Test("an unparsable first request head is answered 400 and the connection closed", .timeLimit(.minutes(3)))
    func unparsableHead() async throws {
        try await Self.withServer { port in
            for head in [
                "GET /api/now/table/x\u{0}y HTTP/1.1\r\nHost: x\r\n\r\n",
                "GET / HTTP/9.9\r\n\r\n",
                "GARBAGE\r\n\r\n",
                "GET /api/now/table/incident HTTP/1.1\r\nX-A: " + String(repeating: "a", count: 100_000) + "\r\n\r\n",
            ] {
                let (answer, closed) = try await Self.exchange(port, Array(head.utf8))
                #expect(answer.hasPrefix("HTTP/1.1 400"), "\(head.prefix(30))")
                #expect(closed)
            }
            // A later unparsable request on a kept-alive connection is answered too.
            let (answer, _) = try await Self.exchange(
                port, Array("GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /x\u{0} HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            )
            #expect(answer.hasPrefix("HTTP/1.1 200"))
            #expect(answer.contains("HTTP/1.1 400"))
        }
    }

    @Test("a request head over 16 KiB is answered with ServiceNow's HTML 400 page and the connection closed; a smaller one is served", .timeLimit(.minutes(3)))
    func oversizedHead() async throws {
        try await Self.withServer { port in
            let auth = "Authorization: Basic " + Data("john.doe:password".utf8).base64EncodedString()
            func request(table length: Int) -> String {
                "GET /api/now/table/\(String(repeating: "A", count: length))/x HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\(auth)\r\n\r\n"
            }
            let (small, _) = try await Self.exchange(port, Array(request(table: 8_000).utf8), limit: .milliseconds(500))
            #expect(small.hasPrefix("HTTP/1.1 400"))
            #expect(small.contains("\"message\":\"Invalid table AAAA"))
            for length in [16_500, 23_000, 100_000] {
                let (answer, closed) = try await Self.exchange(port, Array(request(table: length).utf8))
                #expect(answer.hasPrefix("HTTP/1.1 400"), "\(length)")
                #expect(answer.lowercased().contains("content-type: text/html"), "\(length)")
                #expect(answer.contains("<!DOCTYPE html>") && answer.contains("Request header is too large"), "\(length)")
                #expect(closed, "\(length)")
            }
            // Large headers count too; a pipelined one is refused after the answer before it.
            let big = "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "b", count: 20_000))\r\n\r\n"
            let (pipelined, closed) = try await Self.exchange(port, Array(("GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + big).utf8))
            #expect(pipelined.hasPrefix("HTTP/1.1 200"))
            #expect(pipelined.contains("HTTP/1.1 400") && pipelined.contains("Request header is too large"))
            #expect(closed)
        }
    }

    @Test("a chunk announcing more than any body (ffffffffffffffff) is answered 400 at once, by every dialect", .timeLimit(.minutes(3)))
    func absurdChunk() async throws {
        // An idle timeout far beyond the test's: a request waiting for its chunk gets no answer at all (its connection
        // is never cut off meanwhile), so an answer, whenever it comes, is the refusal.
        try await Self.withServer(configure: { $0.idleTimeout = .seconds(3600) }) { port in
            let auth = "Authorization: Basic " + Data("john.doe:password".utf8).base64EncodedString()
            for path in ["/api/now/table/incident", "/app/login", "/ccmweb/rest/repos", "/graphql", "/oauth_token.do"] {
                let request = "POST \(path) HTTP/1.1\r\nHost: x\r\n\(auth)\r\nContent-Type: application/json\r\n"
                    + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc\r\n"
                // Before the fix, no answer came: the connection waited for the chunk. The limit only ends a stall.
                let (answer, _) = try await Self.exchange(port, Array(request.utf8), limit: .seconds(60))
                #expect(answer.hasPrefix("HTTP/1.1 4"), "\(path): \(answer.prefix(60))")
            }
        }
    }

    @Test("a first request head that never completes is cut off after the idle timeout", .timeLimit(.minutes(3)))
    func slowHead() async throws {
        try await Self.withServer { port in
            // The server closes it (the limit, far above the idle timeout, only ends a stall of the test).
            let (_, closed) = try await Self.exchange(port, Array("GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ".utf8), limit: .seconds(120))
            #expect(closed)
        }
    }

    /// Opens a connection, sends `bytes`, and returns it once what came back contains `marker`.
    static func open(_ port: Int, _ bytes: [UInt8], until marker: String) async throws -> (any Channel, Collector) {
        let collector = Collector()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector) }
            }
            .connect(host: "127.0.0.1", port: port).get()
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes))
        for _ in 0..<500 {
            if String(decoding: collector.received.withLock { $0 }, as: UTF8.self).contains(marker) { return (channel, collector) }
            try await Task.sleep(for: .milliseconds(10))
        }
        try? await channel.close()
        throw CancellationError()
    }

    @Test(
        "an event stream whose client closes the connection, or only its sending side, is released at once, long before a heartbeat",
        .timeLimit(.minutes(3)), arguments: [CloseMode.all, .output]
    )
    func streamReleasedWhenClientLeaves(mode: CloseMode) async throws {
        try await Self.withServer(configure: {
            $0.liveStreamsPerUser = 1
            $0.liveHeartbeat = .seconds(60)
        }) { port in
            let auth = "Authorization: Basic " + Data("john.doe:password".utf8).base64EncodedString()
            let request = "GET /api/docket/events?table=incident HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\(auth)\r\n\r\n"
            for round in 0..<3 {
                let (channel, collector) = try await Self.open(port, Array(request.utf8), until: "event: ready")
                // While it is open, the user's one stream is taken.
                let (refused, _) = try await Self.exchange(
                    port, Array(request.replacingOccurrences(of: "table=incident", with: "follow=false").utf8),
                    limit: .milliseconds(500)
                )
                #expect(refused.hasPrefix("HTTP/1.1 429"), "round \(round)")
                let start = ContinuousClock.now
                try await channel.close(mode: mode)
                // The place is free again well before the 60-second heartbeat would have found the client gone.
                var freed = false
                while ContinuousClock.now - start < .seconds(30), !freed {
                    let (answer, _) = try await Self.exchange(
                        port, Array(request.replacingOccurrences(of: "table=incident", with: "follow=false").utf8),
                        limit: .milliseconds(300)
                    )
                    freed = answer.hasPrefix("HTTP/1.1 200")
                    if !freed { try await Task.sleep(for: .milliseconds(20)) }
                }
                #expect(freed, "round \(round): the stream still counts after its client left")
                if mode == .output {
                    // The server ends its half too.
                    let closed = Mutex(false)
                    channel.closeFuture.whenComplete { _ in closed.withLock { $0 = true } }
                    for _ in 0..<500 where !closed.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
                    #expect(closed.withLock { $0 }, "round \(round): the server kept the connection open")
                    try? await channel.close()
                    #expect(String(decoding: collector.received.withLock { $0 }, as: UTF8.self).contains("event: ready"))
                }
            }
        }
    }
}
