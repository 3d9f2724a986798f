import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL
import NIOTLS

/// How docketd's connections are set up.
///
/// - Plain HTTP: HTTP/1.1 whose requests may upgrade to a WebSocket (the GraphQL subscription endpoints).
/// - TLS: by ALPN, `h2` gets HTTP/2 (the REST and GraphQL APIs over multiplexed streams) and `http/1.1` (or no ALPN)
///   gets the same HTTP/1.1 as plain HTTP, WebSocket upgrades included. Hummingbird's WebSocket upgrade is
///   HTTP/1.1 only (RFC 8441's WebSockets over HTTP/2 is not offered), so WebSocket clients over TLS must offer
///   `http/1.1`, which every WebSocket client does.
enum ServerChannels {
    static func builder(
        webSocketRouter: Router<DocketSocketContext>, http1: HTTP1Channel.Configuration, webSocket: WebSocketServerConfiguration,
        idleTimeout: Duration, tls: TLSConfiguration?, maxBodySize: Int
    ) throws -> HTTPServerBuilder {
        let responder = webSocketRouter.buildResponder()
        let configuration = HTTP1WebSocketUpgradeChannel.Configuration(http1: http1, ws: webSocket)
        let headTimeout = http1.idleTimeout
        guard let tls else {
            return HTTPServerBuilder { httpResponder in
                HeadTimedChannel(
                    inner: HTTP1WebSocketUpgradeChannel(
                        responder: httpResponder, webSocketResponder: responder, configuration: configuration
                    ),
                    headTimeout: headTimeout, maxBodySize: maxBodySize
                )
            }
        }
        var tlsConfiguration = tls
        tlsConfiguration.applicationProtocols = NIOHTTP2SupportedALPNProtocols
        let context = try NIOSSLContext(configuration: tlsConfiguration)
        return HTTPServerBuilder { httpResponder in
            NegotiatingTLSChannel(
                sslContext: context,
                http1: HeadTimedChannel(
                    inner: HTTP1WebSocketUpgradeChannel(
                        responder: httpResponder, webSocketResponder: responder, configuration: configuration
                    ),
                    headTimeout: headTimeout, maxBodySize: maxBodySize
                ),
                http2: HTTP2Channel(
                    responder: httpResponder, configuration: .init(idleTimeout: idleTimeout, streamConfiguration: http1)
                )
            )
        }
    }
}

/// HTTP/1.1 with WebSocket upgrades, whose first request head must arrive within the idle timeout.
///
/// The upgrade-capable pipeline only adds Hummingbird's idle handling once the first head was parsed (it must
/// first see whether the request upgrades), so without this a client could hold a connection open forever by
/// sending its first head a byte at a time.
struct HeadTimedChannel: ServerChildChannel, HTTPChannelHandler {
    typealias Value = HTTP1WebSocketUpgradeChannel.Value
    let inner: HTTP1WebSocketUpgradeChannel
    let headTimeout: TimeAmount?
    /// The largest body docketd takes: a chunk announcing more is refused at once (``ChunkSizeGuard``).
    let maxBodySize: Int

    var responder: HTTPChannelHandler.Responder { inner.responder }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            try channel.pipeline.syncOperations.addHandler(InputCloseWatcher(), position: .first)
            let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try channel.pipeline.syncOperations.addHandler(ChunkSizeGuard(limit: maxBodySize), position: .before(decoder))
            try channel.pipeline.syncOperations.addHandler(WebSocketHandshakeGuard(), position: .after(decoder))
            if let headTimeout {
                try channel.pipeline.syncOperations.addHandler(FirstHeadTimeoutHandler(timeout: headTimeout), position: .after(decoder))
            }
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

/// Guards a connection's first request head in the upgrade-capable pipeline, where Hummingbird's own handling
/// only starts after it: closes the connection when the head has not arrived in time, and answers an unparsable
/// head with a 400 (the upgrade handler would otherwise leave the client waiting). Removes itself once a head
/// has passed.
final class FirstHeadTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler, LingeringDraining {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    let timeout: TimeAmount
    private var scheduled: Scheduled<Void>?

    init(timeout: TimeAmount) { self.timeout = timeout }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        scheduled = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        scheduled?.cancel()
        scheduled = nil
    }

    private(set) var drain = LingeringDrain()

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if drain.isActive { return }
        guard error is HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        scheduled?.cancel()
        scheduled = nil
        // A head too large even for the parser gets the page every too large head gets (``HeadLimitHandler``).
        let page = (error as? HTTPParserError) == .headerOverflow ? ByteBuffer(string: HeadLimitHandler.page) : nil
        var headers = HTTPHeaders()
        headers.add(name: "Connection", value: "close")
        if page != nil { headers.add(name: "Content-Type", value: "text/html; charset=utf-8") }
        headers.add(name: "Content-Length", value: String(page?.readableBytes ?? 0))
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .badRequest, headers: headers))), promise: nil)
        if let page { context.write(wrapOutboundOut(.body(.byteBuffer(page))), promise: nil) }
        // Then a lingering close, as LingeringCloseHandler does for answered requests: what the client still
        // sends is read and dropped for a while, so that a client still writing gets to read the answer.
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(mode: .output, promise: nil) }
        drain.start(context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if drain.isActive { return }
        if case .head = unwrapInboundIn(data) {
            scheduled?.cancel()
            scheduled = nil
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        context.fireChannelRead(data)
    }
}

/// Lets only a well-formed WebSocket handshake (RFC 6455 §4.2.1: `Sec-WebSocket-Key` of 16 bytes in base64 and
/// `Sec-WebSocket-Version: 13`) reach the upgrade handler, which otherwise closes the connection without a word. Any
/// other request that asks to upgrade goes on as plain HTTP, without its `Upgrade`, and gets an answer (a 404, or
/// the endpoint's own refusal). Only the first head can upgrade: the guard removes itself after it.
final class WebSocketHandshakeGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else { return context.fireChannelRead(data) }
        if head.headers[canonicalForm: "upgrade"].contains(where: { $0.lowercased() == "websocket" }), !Self.isValidHandshake(head.headers) {
            head.headers.remove(name: "Upgrade")
            let connection = head.headers[canonicalForm: "connection"].filter { $0.lowercased() != "upgrade" }
            head.headers.remove(name: "Connection")
            for token in connection { head.headers.add(name: "Connection", value: String(token)) }
        }
        context.fireChannelRead(wrapInboundOut(.head(head)))
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    static func isValidHandshake(_ headers: HTTPHeaders) -> Bool {
        let keys = headers["Sec-WebSocket-Key"]
        guard keys.count == 1, let key = keys.first?.trimmingCharacters(in: .whitespaces), key.utf8.count == 24,
            let bytes = Data(base64Encoded: key), bytes.count == 16
        else { return false }
        return headers["Sec-WebSocket-Version"].map { $0.trimmingCharacters(in: .whitespaces) } == ["13"]
    }
}

/// TLS with ALPN: `h2` to HTTP/2, `http/1.1` or nothing to HTTP/1.1 with WebSocket upgrades.
struct NegotiatingTLSChannel: ServerChildChannel, HTTPChannelHandler {
    struct Value: ServerChildChannelValue {
        let negotiated: EventLoopFuture<NIONegotiatedHTTPVersion<HeadTimedChannel.Value, HTTP2Channel.Value>>
        let channel: any Channel
    }

    let sslContext: NIOSSLContext
    let http1: HeadTimedChannel
    let http2: HTTP2Channel

    var responder: HTTPChannelHandler.Responder { http1.responder }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandlers(PlainHTTPOnTLSPort(), NIOSSLServerHandler(context: sslContext))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return channel.configureHTTP2AsyncSecureUpgrade { channel in
            self.http1.setup(channel: channel, logger: logger)
        } http2ConnectionInitializer: { channel in
            self.http2.setup(channel: channel, logger: logger)
        }
        .map { Value(negotiated: $0, channel: channel) }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            switch try await value.negotiated.get() {
            case .http1_1(let connection): await http1.handle(value: connection, logger: logger)
            case .http2(let connection): await http2.handle(value: connection, logger: logger)
            }
        } catch {
            logger.debug("TLS negotiation failed", metadata: ["error": "\(error)"])
        }
    }
}

/// On a TLS port, a request in plain HTTP (`http://` given for an `https://` server) is answered in plain HTTP with
/// the address to use instead (a 400, as nginx and Go's server answer one), rather than by a closed connection that curl reports as
/// "Empty reply from server". Anything else (a TLS record starts with 0x16) goes on to TLS untouched, and this
/// handler leaves the pipeline at the first bytes.
final class PlainHTTPOnTLSPort: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Answered: what else arrives before the connection closes is dropped.
    private var answered = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return }
        let buffer = unwrapInboundIn(data)
        // An HTTP method starts with an upper-case letter; no TLS record type is one.
        guard let first = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self), (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(first)
        else {
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        answered = true
        let body = Self.advice(head: Array(buffer.readableBytesView.prefix(8192)))
        let response = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
        let written = context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: response)))
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        written.whenComplete { _ in bound.value.close(promise: nil) }
    }

    /// What to say: the https:// address of the request when its head names the host and path (only characters
    /// a URL may hold are repeated), otherwise the scheme to change.
    static func advice(head: [UInt8]) -> String {
        let text = String(decoding: head, as: UTF8.self)
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        let requestLine = lines.first?.split(separator: " ") ?? []
        let path = requestLine.count == 3 ? String(requestLine[1]) : ""
        let host = lines.dropFirst().first { $0.lowercased().hasPrefix("host:") }.map { $0.dropFirst(5).trimmingCharacters(in: .whitespaces) } ?? ""
        let plain = "This port speaks HTTPS, and the request came in plain HTTP. "
        func safe(_ value: String, _ allowed: String) -> Bool {
            !value.isEmpty && value.utf8.count <= 2048 && value.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || allowed.unicodeScalars.contains($0)) }
        }
        guard safe(host, ".-:[]"), path.hasPrefix("/"), safe(path, "/-._~%!$&'()*+,;=:@?") else {
            return plain + "Use https:// instead of http://.\n"
        }
        return plain + "Use https://\(host)\(path)\n"
    }
}

@available(*, unavailable)
extension PlainHTTPOnTLSPort: Sendable {}
