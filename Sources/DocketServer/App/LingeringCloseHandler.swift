import NIOCore
import NIOHTTPTypes

/// Lingering close (RFC 9112 §9.6): when docketd answers a request before reading all of it (a 401 to a large
/// upload, a 413, a 400 to a malformed or oversized head) and then closes the connection, it keeps reading and
/// discarding what the client still sends, for at most ``linger``, instead of leaving it unread.
///
/// Without this the server half-closes its side and stops reading: a client still writing the body blocks
/// with a full socket buffer and never reads the answer that is already waiting, until the idle timeout ends
/// the connection (30 s) with a reset that may destroy the unread answer. Only the output half is closed by
/// the response, so this handler sees that, drops the rest of the request, keeps the socket read, and closes
/// fully when the client stops sending or the linger time is over.
final class LingeringCloseHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The longest time the rest of an unread request is read and thrown away.
    static let linger: TimeAmount = .seconds(2)

    private var draining = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if draining { return }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if draining {
            context.read()
            return
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if draining, let event = event as? ChannelEvent, event == .inputClosed {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // Once the answer is complete and the output closed, nothing the client still sends will be answered.
        guard mode == .output, !draining else {
            context.close(mode: mode, promise: promise)
            return
        }
        draining = true
        context.close(mode: .output, promise: promise)
        context.read()
        let loop = context.eventLoop
        let channel = context.channel
        loop.scheduleTask(in: Self.linger) { channel.close(promise: nil) }
    }
}
