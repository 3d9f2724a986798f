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
    public static var platform: any WebSocketConnector { platform(trusting: nil) }

    /// The connector of this platform, trusting `certificates` besides the system's (a private CA's).
    public static func platform(trusting certificates: TrustedCertificates?) -> any WebSocketConnector {
        #if canImport(WSClient)
        return NIOWebSocketConnector(trusting: certificates)
        #else
        return URLSessionWebSocketConnector(trusting: certificates)
        #endif
    }
}

#if canImport(Darwin)
/// WebSockets through `URLSessionWebSocketTask`.
public struct URLSessionWebSocketConnector: WebSocketConnector {
    let trusted: TrustedCertificates?

    /// Creates a connector; `certificates` are trusted besides the system's.
    public init(trusting certificates: TrustedCertificates? = nil) { trusted = certificates }

    public func connect(to url: URL, subprotocol: String, headers: [String: String]) async throws -> any WebSocketConnection {
        var request = URLRequest(url: url)
        request.setValue(subprotocol, forHTTPHeaderField: "Sec-WebSocket-Protocol")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let session = trusted == nil
            ? URLSession.shared : URLSession(configuration: .ephemeral, delegate: TrustDelegate(trusted), delegateQueue: nil)
        let task = session.webSocketTask(with: request)
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

    /// Judges the server's certificate with the trusted certificates as extra anchors.
    final class TrustDelegate: NSObject, URLSessionTaskDelegate, Sendable {
        let trusted: TrustedCertificates?

        init(_ trusted: TrustedCertificates?) { self.trusted = trusted }

        func urlSession(
            _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
            completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
        ) {
            let answer = ServerTrust.answer(challenge, trusting: trusted) ?? (.performDefaultHandling, nil)
            completionHandler(answer.0, answer.1)
        }
    }
}
#endif

#if canImport(WSClient)
/// WebSockets through swift-websocket's `WebSocketClient` (SwiftNIO).
public struct NIOWebSocketConnector: WebSocketConnector {
    let trusted: TrustedCertificates?

    /// Creates a connector; `certificates` are trusted besides the system's.
    public init(trusting certificates: TrustedCertificates? = nil) { trusted = certificates }

    public func connect(to url: URL, subprotocol: String, headers: [String: String]) async throws -> any WebSocketConnection {
        var fields = HTTPFields()
        if let name = HTTPField.Name("Sec-WebSocket-Protocol") { fields[name] = subprotocol }
        for (name, value) in headers {
            if let name = HTTPField.Name(name) { fields[name] = value }
        }
        let connection = Connection()
        let secure = url.scheme?.lowercased() == "wss"
        var configuration = WebSocketClientConfiguration(maxFrameSize: 16 * 1024 * 1024, additionalHeaders: fields)
        var tls = secure ? TLSConfiguration.makeClientConfiguration() : nil
        if let trusted { tls?.additionalTrustRoots = [.file(trusted.pemFile)] }
        if secure, let host = url.host, Self.isIPAddress(host) {
            // TLS names the server it expects (SNI), which cannot be an IP address: the loopback address is
            // "localhost" (as docketd's documented certificate names it); other addresses need the server's name.
            guard host == "127.0.0.1" || host == "::1" || host == "[::1]" else {
                throw DocketError(
                    kind: .invalidRequest,
                    message: "a WebSocket over TLS needs the server's host name, not the address \(host): use the name its certificate was made for, or Server-Sent Events"
                )
            }
            configuration.sniHostname = "localhost"
        }
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
        do {
            try await connection.waitUntilOpen()
        } catch let error as NIOSSLError {
            throw Self.tlsFailure(error)
        } catch let error as NIOSSLExtraError {
            throw Self.tlsFailure(error)
        } catch let error as BoringSSLError {
            throw Self.tlsFailure(error)
        }
        return connection
    }

    /// A TLS failure does not pass by itself (an untrusted certificate, a name it does not hold): it is reported,
    /// not retried.
    static func tlsFailure(_ error: any Error) -> DocketError {
        DocketError(
            kind: .invalidRequest,
            message: "the WebSocket's TLS handshake failed (for a certificate of your own CA, trust the CA)",
            detail: "\(error)", underlying: error
        )
    }

    static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") || (!host.isEmpty && host.allSatisfy { $0.isNumber || $0 == "." })
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
