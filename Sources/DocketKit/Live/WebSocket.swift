import Foundation

#if canImport(WSClient)
import HTTPTypes
import Logging
import NIOCore
import NIOSSL
import NIOWebSocket
import WSClient
#endif

/// A WebSocket connection carrying text messages: what ``LiveUpdates`` needs of one.
public protocol WebSocketConnection: Sendable {
    /// Sends a text message.
    func send(_ text: String) async throws
    /// The next text message; nil once the connection closed (``closeCode`` then says how).
    func receive() async throws -> String?
    /// The close code the server sent, once the connection closed (4403: the credential ended).
    var closeCode: Int? { get async }
    /// Closes the connection (normal closure).
    func close() async
}

/// Opens WebSocket connections. ``WebSocketConnectors/platform`` is the right one for the platform:
/// `URLSessionWebSocketTask` on Apple platforms, swift-websocket's client on Linux (where URLSession's
/// WebSocket support is unreliable).
public protocol WebSocketConnector: Sendable {
    /// Connects to `url` (`ws:` or `wss:`) offering `subprotocol`, with extra request headers.
    func connect(to url: URL, subprotocol: String, headers: [String: String]) async throws -> any WebSocketConnection
}

/// The WebSocket connectors DocketKit ships.
public enum WebSocketConnectors {
    /// The connector of this platform.
    public static var platform: any WebSocketConnector {
        #if canImport(WSClient)
        return NIOWebSocketConnector()
        #else
        return URLSessionWebSocketConnector()
        #endif
    }
}

#if canImport(Darwin)
/// WebSockets through `URLSessionWebSocketTask`.
public struct URLSessionWebSocketConnector: WebSocketConnector {
    public init() {}

    public func connect(to url: URL, subprotocol: String, headers: [String: String]) async throws -> any WebSocketConnection {
        var request = URLRequest(url: url)
        request.setValue(subprotocol, forHTTPHeaderField: "Sec-WebSocket-Protocol")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let task = URLSession.shared.webSocketTask(with: request)
        task.maximumMessageSize = 16 * 1024 * 1024
        task.resume()
        return Connection(task: task)
    }

    final class Connection: WebSocketConnection, @unchecked Sendable {
        let task: URLSessionWebSocketTask

        init(task: URLSessionWebSocketTask) { self.task = task }

        func send(_ text: String) async throws {
            do {
                try await task.send(.string(text))
            } catch {
                throw DocketError(kind: .transport, message: "the WebSocket could not send", underlying: error)
            }
        }

        func receive() async throws -> String? {
            while true {
                do {
                    switch try await task.receive() {
                    case .string(let text): return text
                    case .data(let data): return String(decoding: data, as: UTF8.self)
                    @unknown default: continue
                    }
                } catch {
                    if task.closeCode != .invalid { return nil }
                    throw DocketError(kind: .transport, message: "the WebSocket connection failed", underlying: error)
                }
            }
        }

        var closeCode: Int? { task.closeCode == .invalid ? nil : task.closeCode.rawValue }

        func close() async { task.cancel(with: .normalClosure, reason: nil) }
    }
}
#endif

#if canImport(WSClient)
/// WebSockets through swift-websocket's `WebSocketClient` (SwiftNIO).
public struct NIOWebSocketConnector: WebSocketConnector {
    public init() {}

    public func connect(to url: URL, subprotocol: String, headers: [String: String]) async throws -> any WebSocketConnection {
        var fields = HTTPFields()
        if let name = HTTPField.Name("Sec-WebSocket-Protocol") { fields[name] = subprotocol }
        for (name, value) in headers {
            if let name = HTTPField.Name(name) { fields[name] = value }
        }
        let connection = Connection()
        let secure = url.scheme?.lowercased() == "wss"
        let configuration = WebSocketClientConfiguration(maxFrameSize: 16 * 1024 * 1024, additionalHeaders: fields)
        let tls = secure ? TLSConfiguration.makeClientConfiguration() : nil
        let text = url.absoluteString
        let run = Task {
            do {
                let frame = try await WebSocketClient.connect(
                    url: text, configuration: configuration, tlsConfiguration: tls, logger: Logger(label: "DocketKit.WebSocket")
                ) { inbound, outbound, _ in
                    connection.opened()
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await message in connection.outgoing {
                                switch message {
                                case .text(let text): try await outbound.write(.text(text))
                                case .close:
                                    try await outbound.close(.normalClosure, reason: nil)
                                    return
                                }
                            }
                        }
                        for try await message in inbound.messages(maxSize: 16 * 1024 * 1024) {
                            if case .text(let text) = message { connection.incoming.yield(text) }
                        }
                        group.cancelAll()
                    }
                }
                connection.closed(code: frame.map { Self.number($0.closeCode) }, error: nil)
            } catch {
                connection.closed(code: nil, error: error)
            }
        }
        connection.run = run
        try await connection.waitUntilOpen()
        return connection
    }

    /// A close code as its number.
    static func number(_ code: WebSocketErrorCode) -> Int {
        switch code {
        case .normalClosure: return 1000
        case .goingAway: return 1001
        case .protocolError: return 1002
        case .unacceptableData: return 1003
        case .dataInconsistentWithMessage: return 1007
        case .policyViolation: return 1008
        case .messageTooLarge: return 1009
        case .missingExtension: return 1010
        case .unexpectedServerError: return 1011
        case .unknown(let number): return Int(number)
        }
    }

    final class Connection: WebSocketConnection, @unchecked Sendable {
        enum Outgoing: Sendable {
            case text(String)
            case close
        }

        let lock = NSLock()
        let incoming: AsyncStream<String>.Continuation
        private let incomingStream: AsyncStream<String>
        let outgoing: AsyncStream<Outgoing>
        private let outgoingContinuation: AsyncStream<Outgoing>.Continuation
        private var iterator: AsyncStream<String>.Iterator
        private var opening: CheckedContinuation<Void, any Error>?
        private var isOpen = false
        private var failure: (any Error)?
        private var code: Int?
        private var finished = false
        var run: Task<Void, Never>?

        init() {
            (incomingStream, incoming) = AsyncStream<String>.makeStream()
            (outgoing, outgoingContinuation) = AsyncStream<Outgoing>.makeStream()
            iterator = incomingStream.makeAsyncIterator()
        }

        func opened() {
            let waiting = lock.withLock {
                isOpen = true
                defer { opening = nil }
                return opening
            }
            waiting?.resume()
        }

        func closed(code: Int?, error: (any Error)?) {
            let waiting = lock.withLock {
                self.code = code
                if !isOpen { failure = error ?? DocketError(kind: .transport, message: "the WebSocket was refused") }
                finished = true
                defer { opening = nil }
                return opening
            }
            incoming.finish()
            outgoingContinuation.finish()
            if let waiting {
                waiting.resume(throwing: DocketError(
                    kind: .transport, message: "the WebSocket could not be opened", underlying: error
                ))
            }
        }

        func waitUntilOpen() async throws {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let state: Result<Void, any Error>? = lock.withLock {
                    if isOpen { return .success(()) }
                    if finished { return .failure(failure ?? DocketError(kind: .transport, message: "the WebSocket closed")) }
                    opening = continuation
                    return nil
                }
                if let state { continuation.resume(with: state) }
            }
        }

        func send(_ text: String) async throws {
            if case .terminated = outgoingContinuation.yield(.text(text)) {
                throw DocketError(kind: .transport, message: "the WebSocket is closed")
            }
        }

        func receive() async throws -> String? {
            // One reader at a time (LiveUpdates' iterator).
            var iterator = lock.withLock { self.iterator }
            let text = await iterator.next()
            lock.withLock { self.iterator = iterator }
            return text
        }

        var closeCode: Int? { lock.withLock { code } }

        func close() async {
            outgoingContinuation.yield(.close)
            outgoingContinuation.finish()
        }
    }
}
#endif
