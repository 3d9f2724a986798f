import AsyncHTTPClient
import Crypto
import DocketModel
import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// How docketd reaches Apple's push service (`--apns-…`): token authentication with a `.p8` key.
public struct APNsConfiguration: Sendable {
    /// The key (`AuthKey_XXXXXXXXXX.p8`, PEM) and its 10-character id, and the team's id.
    public var keyFile: String
    public var keyID: String
    public var teamID: String
    /// The app's bundle id (`apns-topic`).
    public var topic: String
    /// `sandbox` (development builds) or `production`.
    public var environment: String
    /// Another gateway instead of Apple's (tests, private relays), and the CA to trust for it.
    public var url: String?
    public var caFile: String?

    public init(
        keyFile: String, keyID: String, teamID: String, topic: String, environment: String = "production", url: String? = nil,
        caFile: String? = nil
    ) {
        self.keyFile = keyFile
        self.keyID = keyID
        self.teamID = teamID
        self.topic = topic
        self.environment = environment
        self.url = url
        self.caFile = caFile
    }

    /// Where requests go: the given gateway, else Apple's for the environment.
    var base: String {
        if let url { return url.hasSuffix("/") ? String(url.dropLast()) : url }
        return environment == "sandbox" ? "https://api.sandbox.push.apple.com" : "https://api.push.apple.com"
    }

    /// Checks that the key and the CA can be used (at startup, before anything else: a wrong file is a sentence,
    /// not a failed delivery later).
    public func check() throws {
        _ = try signingKey()
        _ = try trustRoots()
    }

    /// The CA to trust for ``url``, when given.
    func trustRoots() throws -> NIOSSLTrustRoots? {
        guard let caFile else { return nil }
        do {
            return .certificates(try NIOSSLCertificate.fromPEMFile(caFile))
        } catch {
            throw APNsConfigurationError("--apns-ca-file \(caFile) is not a PEM certificate: \(error)")
        }
    }

    /// Reads and checks the key: a P-256 private key in PKCS#8 PEM, as Apple's developer site gives it.
    func signingKey() throws -> P256.Signing.PrivateKey {
        let text: String
        do {
            text = try String(contentsOfFile: keyFile, encoding: .utf8)
        } catch {
            throw APNsConfigurationError("--apns-key-file \(keyFile) cannot be read: \(error.localizedDescription)")
        }
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: text)
        } catch {
            throw APNsConfigurationError("--apns-key-file \(keyFile) is not a P-256 private key (an AuthKey .p8 file)")
        }
    }
}

public struct APNsConfigurationError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// Apple's push service, HTTP/2 provider API (RFC 7540 over TLS, negotiated by ALPN): one request per device,
/// `authorization: bearer` with an ES256 provider token reused for 50 minutes (Apple refuses one older than an hour,
/// and one renewed more often than every 20 minutes), `apns-push-type: alert`, `apns-collapse-id` of the record (so
/// that a device shows the newest of several messages about it), `apns-expiration` a day ahead.
final class APNsChannel: PushChannel {
    let http: PushHTTPClient
    let configuration: APNsConfiguration
    let key: P256.Signing.PrivateKey
    private let token = Mutex<(value: String, made: Date)?>(nil)
    static let tokenLifetime: TimeInterval = 50 * 60
    static let payloadLimit = 4096

    /// Reads the key and the CA (failing with a sentence when they cannot be used); the HTTP client is made on
    /// first use.
    init(configuration: APNsConfiguration) throws {
        self.configuration = configuration
        self.key = try configuration.signingKey()
        var tls = TLSConfiguration.makeClientConfiguration()
        if let roots = try configuration.trustRoots() { tls.trustRoots = roots }
        self.http = PushHTTPClient(configuration: PushHTTPClient.pushConfiguration(tls: tls))
    }

    /// The provider token: made anew when older than ``tokenLifetime`` or when Apple said it expired.
    func providerToken(now: Date = Date(), renew: Bool = false) throws -> String {
        if !renew, let current = token.withLock({ $0 }), now.timeIntervalSince(current.made) < Self.tokenLifetime { return current.value }
        let header = Base64URL.encode(Array(#"{"alg":"ES256","kid":"\#(configuration.keyID)"}"#.utf8))
        let claims = Base64URL.encode(Array(#"{"iss":"\#(configuration.teamID)","iat":\#(Int(now.timeIntervalSince1970))}"#.utf8))
        let signature = try key.signature(for: Array((header + "." + claims).utf8))
        let value = header + "." + claims + "." + Base64URL.encode(Array(signature.rawRepresentation))
        token.withLock { $0 = (value, now) }
        return value
    }

    /// The notification as APNs takes it: `aps.alert` with title and body, `thread-id` the record (iOS groups by
    /// it), and docketd's own keys beside `aps` (`id`, `table`, `sys_id`, `url`); at most 4 KB, the body shortened.
    static func payload(_ message: PushMessage) -> [UInt8] {
        func encode(_ body: String) -> [UInt8] {
            JSONValue(members: [
                ("aps", JSONValue(members: [
                    ("alert", JSONValue(members: [("title", .string(message.subject)), ("body", .string(body))])), ("sound", .string("default")),
                    ("thread-id", .string(message.document)),
                ])),
                ("id", .string(message.notification)), ("table", .string(message.table)), ("sys_id", .string(message.document)),
                ("url", .string("/app/item/\(message.table)/\(message.document)")),
            ]).serialized()
        }
        var body = message.message
        var encoded = encode(body)
        while encoded.count > payloadLimit, !body.isEmpty {
            body = String(body.dropLast(max(1, encoded.count - payloadLimit) + 1)) + "…"
            if body == "…" { body = "" }
            encoded = encode(body)
        }
        return encoded
    }

    func send(_ message: PushMessage, to target: PushTarget) async -> PushOutcome {
        guard target.token.count >= 64, target.token.allSatisfy(\.isHexDigit) else { return .gone(status: 0) }
        var renew = false
        for _ in 0..<2 {
            let bearer: String
            do { bearer = try providerToken(renew: renew) } catch { return .failed(status: 0) }
            var request = HTTPClientRequest(url: configuration.base + "/3/device/" + target.token)
            request.method = .POST
            request.headers.add(name: "authorization", value: "bearer " + bearer)
            request.headers.add(name: "apns-topic", value: configuration.topic)
            request.headers.add(name: "apns-push-type", value: "alert")
            request.headers.add(name: "apns-priority", value: "10")
            request.headers.add(name: "apns-expiration", value: String(Int(Date().timeIntervalSince1970) + 86_400))
            if !message.document.isEmpty, message.document.utf8.count <= 64 {
                request.headers.add(name: "apns-collapse-id", value: message.document)
            }
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: Self.payload(message)))
            let status: Int
            let reason: String
            let retryAfter: String?
            do {
                let response = try await http.client.execute(request, timeout: .seconds(15))
                let body = try await response.body.collect(upTo: 16 * 1024)
                status = Int(response.status.code)
                reason = (try? JSONValue.parse(Array(body.readableBytesView)))?["reason"]?.stringValue ?? ""
                retryAfter = response.headers.first(name: "retry-after")
            } catch {
                return .retry(status: 0, after: nil)
            }
            switch (status, reason) {
            case (200, _): return .delivered
            case (403, "ExpiredProviderToken") where !renew:
                renew = true
                continue
            case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"): return .gone(status: status)
            case (429, _), (500..<600, _): return .retry(status: status, after: retryAfter.flatMap { Int($0) })
            default: return .failed(status: status)
            }
        }
        return .failed(status: 403)
    }
}
