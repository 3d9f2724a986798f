import Foundation
import Hummingbird
import HummingbirdTesting
import Synchronization

/// A UnifiedPush endpoint on loopback for tests: `GET /up/{name}` answers as a UnifiedPush server does
/// (`{"unifiedpush":{"version":1}}`), `POST /up/{name}` keeps the raw body (201); `/gone/{name}` answers 410.
public final class PushReceiver: Sendable {
    public struct Message: Sendable {
        public let name: String
        public let body: Data
        public let headers: [String: String]
    }

    let received = Mutex<[Message]>([])

    public var messages: [Message] { received.withLock { $0 } }
}

/// Runs a ``PushReceiver`` on a free loopback port for the duration of `body`, which gets it and its base URL.
public func withPushReceiver<T: Sendable>(_ body: @Sendable (PushReceiver, String) async throws -> T) async throws -> T {
    let receiver = PushReceiver()
    let router = Router()
    router.get("/up/:name") { _, _ in
        Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"unifiedpush":{"version":1}}"#))
        )
    }
    router.post("/up/:name") { request, context in
        let bytes = try await request.body.collect(upTo: 8192)
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        // HTTP/1's Host arrives as the request's authority.
        if let authority = request.head.authority { headers["host"] = authority }
        receiver.received.withLock {
            $0.append(.init(name: context.parameters.get("name") ?? "", body: Data(bytes.readableBytesView), headers: headers))
        }
        return Response(status: .created)
    }
    router.post("/gone/:name") { _, _ in Response(status: .gone) }
    let port = Mutex<Int?>(nil)
    let app = Application(
        router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in port.withLock { $0 = channel.localAddress?.port } }
    )
    return try await app.test(.live) { _ in
        guard let port = port.withLock({ $0 }) else { throw LiveServerError.noPort }
        return try await body(receiver, "http://127.0.0.1:\(port)")
    }
}
