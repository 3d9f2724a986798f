import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The way back from the browser for `docket login --sso --browser` (RFC 8252 §7.3): an HTTP listener on
/// 127.0.0.1, on a port the system picks, that takes the first request to `/callback`, answers it with a page the
/// person can close, and hands its path and query to the login.
final class LoopbackRedirect: Sendable {
    let port: Int
    private let channel: any Channel
    private let received: EventLoopPromise<String>

    private init(port: Int, channel: any Channel, received: EventLoopPromise<String>) {
        self.port = port
        self.channel = channel
        self.received = received
    }

    /// The redirect URI to register the request with.
    var redirectURI: String { "http://127.0.0.1:\(port)/callback" }

    static func start() async throws -> LoopbackRedirect {
        let group = MultiThreadedEventLoopGroup.singleton
        let received = group.next().makePromise(of: String.self)
        let once = Once()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 8)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(CallbackHandler(received: received, once: once))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return LoopbackRedirect(port: channel.localAddress?.port ?? 0, channel: channel, received: received)
    }

    /// The path and query of the browser's request, once it comes (or nil after `timeout`).
    func callback(timeout: Duration) async throws -> String? {
        let future = received.futureResult
        return try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask { try await future.get() }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    func close() async {
        try? await channel.close()
        received.fail(ChannelError.ioOnClosedChannel)
    }
}

/// Lets one callback through, whatever else arrives (a browser's second request, a favicon).
private final class Once: Sendable {
    private let done = Atomic<Bool>(false)
    func claim() -> Bool { !done.exchange(true, ordering: .relaxed) }
}

private final class CallbackHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let received: EventLoopPromise<String>
    let once: Once

    init(received: EventLoopPromise<String>, once: Once) {
        self.received = received
        self.once = once
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data) else { return }
        let isCallback = head.method == .GET && head.uri.hasPrefix("/callback")
        let body = isCallback
            ? "<!doctype html><meta charset=\"utf-8\"><title>docket</title><p>The sign-in is back with docket. You may close this window.</p>"
            : "<!doctype html><title>docket</title><p>Not found.</p>"
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/html; charset=utf-8")
        headers.add(name: "Content-Length", value: String(body.utf8.count))
        headers.add(name: "Connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: isCallback ? .ok : .notFound, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        if isCallback, once.claim() { received.succeed(head.uri) }
    }
}
