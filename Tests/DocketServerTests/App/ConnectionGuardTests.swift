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

    static func withServer(_ test: @Sendable (Int) async throws -> Void) async throws {
        let directory = TemporaryDirectory()
        var configuration = try await TestApp.demoConfiguration(dataDirectory: directory.path)
        configuration.idleTimeout = .seconds(1)
        let app = try await buildApplication(configuration)
        try await app.test(.live) { client in try await test(try #require(client.port)) }
    }

    @Test("an unparsable first request head is answered 400 and the connection closed", .timeLimit(.minutes(1)))
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

    @Test("a first request head that never completes is cut off after the idle timeout", .timeLimit(.minutes(1)))
    func slowHead() async throws {
        try await Self.withServer { port in
            let start = ContinuousClock.now
            let (_, closed) = try await Self.exchange(port, Array("GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ".utf8), limit: .seconds(10))
            #expect(closed)
            #expect(ContinuousClock.now - start < .seconds(5))
        }
    }
}
