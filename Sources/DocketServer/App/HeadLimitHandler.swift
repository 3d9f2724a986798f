import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Limits a request head (request line and headers) to ``limit`` bytes, as ServiceNow does: a larger head is
/// answered with an HTML 400 page, "Request header is too large", and the connection closed (what the client still
/// sends is read and dropped for a while, as ``LingeringCloseHandler`` does). Heads too large for the HTTP/1 parser
/// itself (80 KiB) get the same page, instead of an empty 400.
///
/// It sits among the HTTP handlers of connections that did not become WebSockets (a first head that cannot be
/// parsed is answered by ``FirstHeadTimeoutHandler``). A head that arrives while the answer to an earlier request
/// is still being written (HTTP/1.1 pipelining) is refused right after that answer.
final class HeadLimitHandler: ChannelDuplexHandler, RemovableChannelHandler, LingeringDraining {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// 16 KiB: ServiceNow answers 8 KB of table name as JSON, and 23 KB with this page.
    static let limit = 16 * 1024

    static let page = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>400 Bad Request</title></head>
        <body><h1>Bad Request</h1><p>Request header is too large</p></body></html>

        """

    /// Requests passed on whose answer has not been written completely.
    private var outstanding = 0
    /// A refusal waiting for the answers before it.
    private var refusing = false
    private(set) var drain = LingeringDrain()

    /// About the bytes a head takes on the wire in HTTP/1.1.
    static func size(of head: HTTPRequest) -> Int {
        var size = head.method.rawValue.utf8.count &+ (head.path?.utf8.count ?? 1) &+ 12
        if let authority = head.authority { size = size &+ 8 &+ authority.utf8.count }
        for field in head.headerFields {
            size = size &+ field.name.rawName.utf8.count &+ 4 &+ field.value.utf8.count
        }
        return size &+ 2
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if drain.isActive || refusing { return }
        if case .head(let head) = unwrapInboundIn(data) {
            guard Self.size(of: head) <= Self.limit else {
                refuse(context)
                return
            }
            outstanding += 1
        }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if drain.isActive || refusing { return }
        if let error = error as? HTTPParserError, error == .headerOverflow {
            refuse(context)
            return
        }
        context.fireErrorCaught(error)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(data, promise: promise)
        guard case .end = unwrapOutboundIn(data) else { return }
        outstanding = max(0, outstanding - 1)
        if outstanding == 0, refusing { answer(context) }
    }

    private func refuse(_ context: ChannelHandlerContext) {
        refusing = true
        if outstanding == 0 { answer(context) }
    }

    private func answer(_ context: ChannelHandlerContext) {
        let body = ByteBuffer(string: Self.page)
        let head = HTTPResponse(
            status: .badRequest,
            headerFields: [.contentType: "text/html; charset=utf-8", .contentLength: String(body.readableBytes)]
        )
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(mode: .output, promise: nil) }
        drain.start(context)
    }
}
