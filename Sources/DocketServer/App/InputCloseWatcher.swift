import NIOCore
import Synchronization

/// Tells a long-lived response (an event stream) of an HTTP/1.1 connection that its client has gone: the client
/// closed its side (a browser closing an `EventSource`, leaving the page) or the connection ended.
///
/// Without it, a stream whose client left is only noticed when a heartbeat cannot be written, and until then it
/// counts against the user's live-stream limit. The server allows half-closed connections (a client may close its
/// sending side and still read its answer), so the end of the input does not close the connection by itself; an
/// HTTP/1.1 connection carries one request at a time, so one waiting response per connection is enough.
/// HTTP/2 streams need none of this: a stream the client resets closes its own channel.
final class InputCloseWatcher: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = Never

    private struct State {
        var closed = false
        var waiting: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    /// Runs `action` once when the client's input ends or the connection closes (at once when it already has),
    /// replacing the action of an earlier response on this connection. Returns a function that forgets it.
    func onClose(_ action: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        let runNow = state.withLock { state -> Bool in
            if state.closed { return true }
            state.waiting = action
            return false
        }
        if runNow { action() }
        return { [weak self] in self?.state.withLock { $0.waiting = nil } }
    }

    private func signal() {
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            state.closed = true
            defer { state.waiting = nil }
            return state.waiting
        }
        action?()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { signal() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        signal()
        context.fireChannelInactive()
    }
}

extension Channel {
    /// Runs `action` once when the client of this channel has gone (see ``InputCloseWatcher``): for an HTTP/1.1
    /// connection, when its input ends or it closes; otherwise (an HTTP/2 stream) when the channel closes.
    /// Returns a function that forgets the action, to call when the response ends first.
    func whenClientLeaves(_ action: @escaping @Sendable () -> Void) async -> @Sendable () -> Void {
        let watcher: InputCloseWatcher?
        do {
            watcher = try await pipeline.handler(type: InputCloseWatcher.self).get()
        } catch {
            // Not an HTTP/1.1 connection of the server (an HTTP/2 stream, or a test's channel): its close says it.
            watcher = nil
        }
        if let watcher { return watcher.onClose(action) }
        closeFuture.whenComplete { _ in action() }
        return {}
    }
}
