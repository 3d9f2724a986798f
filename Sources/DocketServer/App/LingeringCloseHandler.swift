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
final class LingeringCloseHandler: ChannelDuplexHandler, RemovableChannelHandler, LingeringDraining {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The longest time the rest of an unread request is read and thrown away.
    static let linger: TimeAmount = .seconds(2)

    private(set) var drain = LingeringDrain()

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if drain.isActive { return }
        context.fireChannelRead(data)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // Once the answer is complete and the output closed, nothing the client still sends will be answered.
        guard mode == .output, !drain.isActive else {
            context.close(mode: mode, promise: promise)
            return
        }
        context.close(mode: .output, promise: promise)
        drain.start(context)
    }
}

/// A handler that may drain a connection it answered (``LingeringDrain``): while draining, reads are kept going and
/// the end of the client's input closes the connection.
protocol LingeringDraining: ChannelInboundHandler {
    var drain: LingeringDrain { get }
}

extension LingeringDraining {
    func channelReadComplete(context: ChannelHandlerContext) {
        if drain.readComplete(context) { return }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if drain.inboundEvent(event, context) { return }
        context.fireUserInboundEventTriggered(event)
    }
}

/// The reading side of a lingering close: once started, what arrives is dropped and the socket kept read until
/// the client closes its side or ``LingeringCloseHandler/linger`` is over; then the connection is closed.
struct LingeringDrain {
    private(set) var isActive = false

    mutating func start(_ context: ChannelHandlerContext) {
        isActive = true
        context.read()
        let channel = context.channel
        context.eventLoop.scheduleTask(in: LingeringCloseHandler.linger) { channel.close(promise: nil) }
    }

    /// Keeps reading while draining; true when the event was handled here.
    func readComplete(_ context: ChannelHandlerContext) -> Bool {
        guard isActive else { return false }
        context.read()
        return true
    }

    /// Closes when the client has closed its side while draining; true when the event was handled here.
    func inboundEvent(_ event: Any, _ context: ChannelHandlerContext) -> Bool {
        guard isActive, let event = event as? ChannelEvent, event == .inputClosed else { return false }
        context.close(promise: nil)
        return true
    }
}
