import Foundation

/// The AeroGear apps' client configuration (`mobile-services.json`): which services an app talks to. Decoded
/// tolerantly, as the files in the wild differ: `version` is a number or a string, a service's `id` may be missing,
/// push variants spell `variantId` or `variantID`. docketd serves one at `/mobile-services.json?client_id=…`.
public struct MobileServicesConfiguration: Sendable, Equatable, Decodable {
    public var version: String?
    public var clusterName: String?
    public var namespace: String?
    public var clientID: String?
    public var services: [Service]

    /// One service entry.
    public struct Service: Sendable, Equatable, Decodable {
        public var id: String?
        public var name: String?
        public var type: String
        public var url: String
        /// The type-specific settings, as strings, numbers and booleans keep their JSON text (`"true"`, `"0"`).
        public var config: [String: String]
        /// Push variants (`config.ios`, `config.android`, `config.web_push`): id and secret.
        public var variants: [String: PushVariant]

        enum CodingKeys: String, CodingKey { case id, name, type, url, config }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decodeIfPresent(String.self, forKey: .id)
            name = try container.decodeIfPresent(String.self, forKey: .name)
            type = try container.decode(String.self, forKey: .type)
            url = try container.decodeIfPresent(String.self, forKey: .url) ?? ""
            var config: [String: String] = [:]
            var variants: [String: PushVariant] = [:]
            if let settings = try container.decodeIfPresent([String: Loose].self, forKey: .config) {
                for (key, value) in settings {
                    switch value {
                    case .text(let text): config[key] = text
                    case .object(let object):
                        let id = object["variantId"] ?? object["variantID"]
                        if let id { variants[key] = PushVariant(variantID: id, secret: object["variantSecret"] ?? "", appServerKey: object["appServerKey"]) }
                    case .other: continue
                    }
                }
            }
            self.config = config
            self.variants = variants
        }
    }

    public struct PushVariant: Sendable, Equatable {
        public var variantID: String
        public var secret: String
        public var appServerKey: String?
    }

    enum CodingKeys: String, CodingKey { case version, clusterName, namespace, clientId, services }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let number = try? container.decodeIfPresent(Double.self, forKey: .version) {
            version = number == number.rounded() ? String(Int(number)) : String(number)
        } else {
            version = try container.decodeIfPresent(String.self, forKey: .version)
        }
        clusterName = try container.decodeIfPresent(String.self, forKey: .clusterName)
        namespace = try container.decodeIfPresent(String.self, forKey: .namespace)
        clientID = try container.decodeIfPresent(String.self, forKey: .clientId)
        services = try container.decode([Service].self, forKey: .services)
    }

    /// Reads a file's bytes.
    public static func decode(_ data: Data) throws -> MobileServicesConfiguration {
        try JSONDecoder().decode(MobileServicesConfiguration.self, from: data)
    }

    /// The first service of a type (compared case-insensitively, as the iOS SDK does).
    public func service(_ type: String) -> Service? {
        services.first { $0.type.caseInsensitiveCompare(type) == .orderedSame }
    }

    /// The GraphQL endpoint and its WebSocket (`sync-app`; the socket URL derived from the HTTP one when absent).
    public var sync: (http: URL, webSocket: URL)? {
        guard let service = service("sync-app"), let http = URL(string: service.url) else { return nil }
        if let socket = service.config["websocketUrl"].flatMap(URL.init(string:)) { return (http, socket) }
        var components = URLComponents(url: http, resolvingAgainstBaseURL: false)
        components?.scheme = http.scheme == "https" ? "wss" : "ws"
        return components?.url.map { (http, $0) }
    }

    /// The OpenID issuer of the `keycloak` service (`{auth-server-url}/realms/{realm}`) and the app's client id.
    public var openID: (issuer: URL, clientID: String)? {
        guard let service = service("keycloak"), let realm = service.config["realm"], let client = service.config["resource"] else {
            return nil
        }
        var base = service.config["auth-server-url"] ?? service.url
        while base.hasSuffix("/") { base.removeLast() }
        return URL(string: base + "/realms/" + realm).map { ($0, client) }
    }
}

/// A config value: text (numbers and booleans as their JSON text), an object of strings, or something else.
private enum Loose: Decodable {
    case text(String)
    case object([String: String])
    case other

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let text = try? container.decode(String.self) {
            self = .text(text)
        } else if let flag = try? container.decode(Bool.self) {
            self = .text(flag ? "true" : "false")
        } else if let number = try? container.decode(Double.self) {
            self = .text(number == number.rounded() ? String(Int(number)) : String(number))
        } else if let object = try? container.decode([String: Loose].self) {
            self = .object(object.compactMapValues { if case .text(let text) = $0 { return text } else { return nil } })
        } else {
            self = .other
        }
    }
}
