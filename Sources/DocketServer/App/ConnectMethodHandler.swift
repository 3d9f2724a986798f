import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Closes a connection once the answer to a `CONNECT` request is written.
///
/// The HTTP/1 decoder treats `CONNECT` as a switch to another protocol and stops parsing that connection, so
/// every later request on it would wait for an answer that never comes. docketd is not a proxy: `CONNECT`
/// gets the router's answer (404, or 405 below `/api`) and the connection is closed after it.
final class ConnectMethodHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var closeAfterResponse = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data), head.method == .connect { closeAfterResponse = true }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard closeAfterResponse, case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        context.writeAndFlush(data, promise: promise)
        context.close(promise: nil)
    }
}
