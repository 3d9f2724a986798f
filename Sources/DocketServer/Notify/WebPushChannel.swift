import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import ServiceLifecycle
import Synchronization

/// docketd's VAPID key pair (RFC 8292): made once per database and kept in `docket_meta`, so that every instance
/// signs with it and browsers' subscriptions (made with its public key) keep working across restarts.
struct VAPIDKey: Sendable {
    let key: P256.Signing.PrivateKey
    /// Whom push services contact about docketd's messages (`mailto:` or `https:`).
    let subject: String

    struct Corrupt: Error, CustomStringConvertible {
        var description: String { "docket_meta's vapid_private_key is not a P-256 private key: remove it to make a new one (browsers then subscribe again)" }
    }

    /// The public key as browsers take it (`applicationServerKey`): uncompressed P-256, base64url.
    var publicKey: String { Base64URL.encode(Array(key.publicKey.x963Representation)) }

    static func load(storage: any Storage, subject: String) async throws -> VAPIDKey {
        let raw = try await storage.write { db -> String in
            if let stored = try await db.rows("SELECT value FROM docket_meta WHERE key = 'vapid_private_key'").first?
                .value(at: "value", kind: .text).text
            {
                return stored
            }
            let made = Base64URL.encode(Array(P256.Signing.PrivateKey().rawRepresentation))
            try await db.run("INSERT INTO docket_meta (key, value) VALUES ('vapid_private_key', " + .bind(made) + ")")
            return made
        }
        guard let bytes = Base64URL.decode(raw), let key = try? P256.Signing.PrivateKey(rawRepresentation: bytes) else {
            throw Corrupt()
        }
        return VAPIDKey(key: key, subject: subject)
    }
}

/// Web Push (RFC 8030) with an encrypted payload (RFC 8291) and VAPID (RFC 8292); UnifiedPush endpoints take the
/// same request. `Topic` is the record's sys_id, so that a push service holding several undelivered messages about
/// one record for a device keeps only the newest.
struct WebPushChannel: PushChannel {
    let http: PushHTTPClient
    let vapid: VAPIDKey
    let endpoints: EndpointGuard
    /// How long a push service keeps an undelivered message (seconds).
    var timeToLive = 86_400
    var timeout: TimeAmount = .seconds(15)

    func send(_ message: PushMessage, to target: PushTarget) async -> PushOutcome {
        let checked: EndpointGuard.Checked
        let keys: WebPush.SubscriptionKeys
        let body: [UInt8]
        let authorization: String
        do {
            checked = try await endpoints.pin(target.endpoint)
            keys = try WebPush.SubscriptionKeys(p256dh: target.p256dh, auth: target.auth)
            body = try WebPush.encrypt(message.payload(limit: WebPush.maximumPlaintext), for: keys)
            authorization = try WebPush.vapidAuthorization(endpoint: checked.url, key: vapid.key, subject: vapid.subject)
        } catch let refusal as EndpointGuard.Refusal where refusal.transient {
            // The name did not resolve (or not in time): perhaps a moment from now; the subscription stays.
            return .retry(status: 0, after: nil)
        } catch {
            // An endpoint that now points somewhere docketd does not send, or keys that cannot be used: the
            // subscription cannot work.
            return .gone(status: 0)
        }
        var request = HTTPClientRequest(url: target.endpoint)
        request.method = .POST
        request.headers.add(name: "TTL", value: String(timeToLive))
        request.headers.add(name: "Urgency", value: "normal")
        if !message.document.isEmpty, message.document.count <= 32, message.document.allSatisfy({ $0.isLetter || $0.isNumber }) {
            request.headers.add(name: "Topic", value: message.document)
        }
        request.headers.add(name: "Content-Encoding", value: "aes128gcm")
        request.headers.add(name: "Content-Type", value: "application/octet-stream")
        request.headers.add(name: "Authorization", value: authorization)
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let response = try await http.client(for: checked).execute(request, timeout: timeout)
            _ = try? await response.body.collect(upTo: 16 * 1024)
            return Self.outcome(status: Int(response.status.code), retryAfter: response.headers.first(name: "Retry-After"))
        } catch {
            return .retry(status: 0, after: nil)
        }
    }

    /// RFC 8030 §5 and §8.4, UnifiedPush's server rules: 2xx accepted; 404 and 410 gone; 429 and 5xx later (as
    /// `Retry-After` says); other refusals final.
    static func outcome(status: Int, retryAfter: String?) -> PushOutcome {
        switch status {
        case 200..<300: return .delivered
        case 404, 410: return .gone(status: status)
        case 408, 425, 429, 500..<600: return .retry(status: status, after: retryAfter.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) })
        default: return .failed(status: status)
        }
    }
}

/// An HTTP client made on first use and shut down with the application: push deliveries' (connections pooled per
/// push service, no redirects — UnifiedPush's rule, and no way around the endpoint check — short timeouts), and
/// APNs' (HTTP/2, a private gateway's CA). Made late so that a server that fails to start has none to shut down.
///
/// A send to an endpoint a user chose goes through ``client(for:)``: a client that connects to the address the
/// ``EndpointGuard`` checked (TLS and `Host` still name the endpoint's host), one per host and address, the least
/// recently used retired once there are more than ``pinnedLimit`` (after the longest send could take).
final class PushHTTPClient: Service {
    private let configuration: HTTPClient.Configuration
    private let made = Mutex<HTTPClient?>(nil)
    private let pinned = Mutex<(clients: [String: (client: HTTPClient, used: ContinuousClock.Instant)], retiring: [HTTPClient], closed: Bool)>(
        ([:], [], false)
    )
    /// Pinned clients kept at once.
    static let pinnedLimit = 64

    init(configuration: HTTPClient.Configuration = PushHTTPClient.pushConfiguration()) {
        self.configuration = configuration
    }

    static func pushConfiguration(tls: TLSConfiguration? = nil) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow, timeout: .init(connect: .seconds(5), read: .seconds(15)),
            connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 16)
        )
        configuration.httpVersion = .automatic
        return configuration
    }

    var client: HTTPClient {
        made.withLock { made in
            if let client = made { return client }
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            made = client
            return client
        }
    }

    /// The client that connects to a checked endpoint's address (the shared one when the URL names its address).
    func client(for checked: EndpointGuard.Checked) -> HTTPClient {
        guard !checked.isLiteral else { return client }
        let key = checked.host + "\u{0}" + checked.address
        let (found, retired) = pinned.withLock { state -> (HTTPClient?, HTTPClient?) in
            if let found = state.clients[key] {
                state.clients[key]?.used = .now
                return (found.client, nil)
            }
            // Stopping: no new client (one made now would never be shut down); the shared one refuses the send.
            guard !state.closed else { return (nil, nil) }
            var configuration = self.configuration
            configuration.dnsOverride = [checked.host: checked.address]
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            state.clients[key] = (client, .now)
            var retired: HTTPClient? = nil
            if state.clients.count > Self.pinnedLimit, let oldest = state.clients.min(by: { $0.value.used < $1.value.used }) {
                state.clients.removeValue(forKey: oldest.key)
                state.retiring.append(oldest.value.client)
                retired = oldest.value.client
            }
            return (client, retired)
        }
        if let retired { retire(retired) }
        return found ?? client
    }

    /// Shuts a client down once the sends it may be serving are over (or at the application's stop).
    private func retire(_ client: HTTPClient) {
        Task {
            do { try await Task.sleep(for: .seconds(30)) } catch {}
            let mine = pinned.withLock { state -> Bool in
                guard let index = state.retiring.firstIndex(where: { $0 === client }) else { return false }
                state.retiring.remove(at: index)
                return true
            }
            if mine { try? await client.shutdown() }
        }
    }

    func run() async throws {
        try? await gracefulShutdown()
        try await shutdown()
    }

    /// Shuts every client down (``run()`` does at the application's stop; a test that made one calls it).
    func shutdown() async throws {
        let client = made.withLock { $0 }
        let others = pinned.withLock { state -> [HTTPClient] in
            state.closed = true
            defer { state.clients = [:]; state.retiring = [] }
            return state.clients.values.map(\.client) + state.retiring
        }
        for other in others { try? await other.shutdown() }
        try await client?.shutdown()
    }
}
