import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import NIOWebSocket
import Synchronization

/// The two GraphQL-over-WebSocket protocols, chosen by the client's `Sec-WebSocket-Protocol` (spec §3.2, §3.3).
enum GraphQLSocketProtocol: String, Sendable {
    /// The current protocol (`graphql-ws` the library; Apollo iOS 2, gql's `GRAPHQL_TRANSPORT_WS`).
    case transportWS = "graphql-transport-ws"
    /// subscriptions-transport-ws (Apollo iOS 0.x/1.x, Apollo Server 2, gql's default).
    case legacy = "graphql-ws"

    /// The first protocol the client offers that docketd speaks; nil when it offers none of them.
    static func chosen(from header: String?) -> GraphQLSocketProtocol? {
        for offer in (header ?? "").split(separator: ",") {
            if let known = GraphQLSocketProtocol(rawValue: offer.trimmingCharacters(in: .whitespaces)) { return known }
        }
        return nil
    }

    /// Close codes (spec §3.2; the legacy protocol has none of its own, so it is told the same).
    enum Close {
        static let badRequest = WebSocketErrorCode(codeNumber: 4400)
        static let unauthorized = WebSocketErrorCode(codeNumber: 4401)
        static let forbidden = WebSocketErrorCode(codeNumber: 4403)
        static let subprotocolNotAcceptable = WebSocketErrorCode(codeNumber: 4406)
        static let initTimeout = WebSocketErrorCode(codeNumber: 4408)
        static let duplicateSubscriber = WebSocketErrorCode(codeNumber: 4409)
        static let tooManyInits = WebSocketErrorCode(codeNumber: 4429)
        static let internalError = WebSocketErrorCode(codeNumber: 4500)
        /// The server cannot serve the socket right now (its database is unavailable): reconnect later.
        static let tryAgainLater = WebSocketErrorCode.unexpectedServerError
    }
}

/// One operation a client starts on a socket.
struct SocketOperationRequest: Sendable {
    var query: String?
    var variables: JSONValue?
    var operationName: String?
}

/// What a dialect makes of an operation.
enum SocketOperation: Sendable {
    /// A query or mutation: its whole result (`{"data", "errors"}`), sent once.
    case single([UInt8])
    /// Refused before it ran (syntax, validation, arguments): GraphQL error objects.
    case refused([JSONValue])
    /// A subscription: changes the engine's event log shows it.
    case stream(LiveSubscription)
}

/// What each dialect that offers GraphQL over WebSocket provides.
protocol GraphQLSocketDialect: Sendable {
    /// How its sockets are authenticated (``SocketLogins``).
    var logins: SocketLogins { get }
    /// Prepares one operation.
    func operation(_ request: SocketOperationRequest, caller: Caller) async -> SocketOperation
}

extension GraphQLSocketDialect {
    /// Who the connection is: from `connection_init`'s payload when it carries credentials, else from the
    /// upgrade request (see ``SocketLogins``).
    func authenticate(payload: JSONValue?, request: Request, clientAddress: String) async -> SocketLogin {
        await logins.authenticate(payload: payload, request: request, clientAddress: clientAddress)
    }
}

/// The result of a connection's authentication.
enum SocketLogin: Sendable {
    case accepted(Caller, PresentedCredential)
    case rejected(String)
    /// The login could not be checked (the database is unavailable, password checking is busy): the socket closes
    /// with 1011, which clients treat as a reason to reconnect later, not as refused credentials.
    case unavailable(String)
}

/// What every GraphQL socket shares: the engine, the credential checks and the limits.
struct GraphQLSocketServer: Sendable {
    let store: RecordStore
    let credentials: CredentialCheck
    let streams: LiveStreamLimit
    /// Keep-alive period (`ka` of the legacy protocol) and how often credentials are checked again.
    let heartbeat: Duration
    /// How long a connection may stay without `connection_init`.
    var initTimeout: Duration
    /// Operations one connection may run at once.
    var operationsPerConnection = 100
    /// The largest message a client may send.
    static let maxMessageSize = 256 * 1024
    /// Keep-alives and credential checks of every socket.
    let clock = SocketClock()
    /// Subscriptions (and event streams) that follow the head of the log alike, served together.
    let groups: LiveGroups

    init(
        store: RecordStore, credentials: CredentialCheck, streams: LiveStreamLimit, groups: LiveGroups, heartbeat: Duration,
        initTimeout: Duration
    ) {
        self.store = store
        self.credentials = credentials
        self.streams = streams
        self.groups = groups
        self.heartbeat = heartbeat
        self.initTimeout = initTimeout
    }

    /// Decides the upgrade: a GraphQL socket needs one of the two subprotocols; a client that offers neither
    /// is still upgraded, and then closed with 4406 (as the reference servers do), so that it learns why.
    func shouldUpgrade(_ request: Request) -> RouterShouldUpgrade {
        guard let chosen = GraphQLSocketProtocol.chosen(from: request.headers[.secWebSocketProtocol]) else {
            return .upgrade([:])
        }
        return .upgrade([.secWebSocketProtocol: chosen.rawValue])
    }

    /// Runs one connection until either side closes it.
    func run(
        dialect: any GraphQLSocketDialect, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter,
        context: WebSocketRouterContext<DocketSocketContext>
    ) async throws {
        let request = context.request
        guard let kind = GraphQLSocketProtocol.chosen(from: request.headers[.secWebSocketProtocol]) else {
            try await outbound.close(GraphQLSocketProtocol.Close.subprotocolNotAcceptable, reason: "Subprotocol not acceptable")
            return
        }
        let connection = GraphQLSocketConnection(
            server: self, dialect: dialect, kind: kind, outbound: outbound, channel: context.requestContext.channel,
            request: request, clientAddress: context.requestContext.clientAddress, logger: context.logger
        )
        await connection.run(inbound: inbound)
    }
}

/// The request context of WebSocket upgrades (a router of its own decides them).
struct DocketSocketContext: RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<DocketSocketContext>
    let clientAddress: String
    /// The connection's channel: results shared by a group of subscriptions are written straight to it.
    let channel: any Channel

    init(source: Source) {
        self.coreContext = .init(source: source)
        self.webSocket = .init()
        self.clientAddress = source.channel.remoteAddress?.ipAddress ?? "unknown"
        self.channel = source.channel
    }
}
