import DocketModel
import Foundation
import Logging

/// OAuth and OpenID Connect clients from the command line (`docketd clients create|list|delete`): records of
/// `oauth_entity`, the one registry ServiceNow's `/oauth_token.do` and the OpenID provider share. A running server
/// sees a change at once (it follows the table's events, or reads it on the next request).
public enum ClientAdministration {
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// A client as `docketd clients list` shows it.
    public struct ClientInfo: Sendable, Equatable {
        public let clientID: String
        public let name: String
        public let isPublic: Bool
        public let active: Bool
        public let grantTypes: [String]
        public let redirectURIs: [String]
        public let postLogoutRedirectURIs: [String]
    }

    /// What `docketd clients create` registers.
    public struct NewClient: Sendable {
        public var clientID: String
        public var name: String
        public var isPublic: Bool
        /// The secret of a confidential client; nil makes one (returned once, stored only as a bcrypt hash).
        public var secret: String?
        public var grantTypes: [String]
        public var redirectURIs: [String]
        public var postLogoutRedirectURIs: [String]
        public var accessLifespan: Int?

        public init(
            clientID: String, name: String = "", isPublic: Bool = false, secret: String? = nil, grantTypes: [String] = [],
            redirectURIs: [String] = [], postLogoutRedirectURIs: [String] = [], accessLifespan: Int? = nil
        ) {
            self.clientID = clientID
            self.name = name
            self.isPublic = isPublic
            self.secret = secret
            self.grantTypes = grantTypes
            self.redirectURIs = redirectURIs
            self.postLogoutRedirectURIs = postLogoutRedirectURIs
            self.accessLifespan = accessLifespan
        }
    }

    /// The grants a client may be given.
    public static let knownGrants: Set<String> = [
        "authorization_code", "refresh_token", "password", "client_credentials", "urn:ietf:params:oauth:grant-type:device_code",
    ]

    public static func list(in configuration: Configuration) async throws -> [ClientInfo] {
        try await withStore(configuration) { store in
            let rows = try await store.list(
                RecordQuery(table: "oauth_entity", query: EncodedQuery(orderBy: [OrderTerm("client_id")]), fields: ["client_id"], limit: 10_000, count: false),
                caller: .system
            ).records
            var clients: [ClientInfo] = []
            for row in rows {
                guard let id = row.values["client_id"]?.stringValue,
                    let client = try await OAuthDirectory(store: store).client(clientID: id)
                else { continue }
                clients.append(info(client))
            }
            return clients
        }
    }

    /// Registers a client; returns it with the secret to give its owner (nil for a public client).
    public static func create(_ new: NewClient, in configuration: Configuration) async throws -> (client: ClientInfo, secret: String?) {
        let id = new.clientID.trimmingCharacters(in: .whitespaces)
        guard !id.isEmpty, id.count <= 100, id.allSatisfy({ $0.isLetter || $0.isNumber || "-_.:".contains($0) }) else {
            throw Failure("A client id is 1 to 100 letters, digits, '-', '_', '.' or ':'.")
        }
        let unknown = new.grantTypes.filter { !knownGrants.contains($0) }
        guard unknown.isEmpty else {
            throw Failure("Unknown grant type \(unknown[0]); the grants are \(knownGrants.sorted().joined(separator: ", ")).")
        }
        if new.isPublic, new.grantTypes.contains("client_credentials") {
            throw Failure("A public client has no secret, so it cannot use client_credentials.")
        }
        if new.isPublic, new.secret != nil { throw Failure("A public client has no secret; leave out --secret.") }
        if new.grantTypes.contains("authorization_code"), new.redirectURIs.isEmpty {
            throw Failure("The authorization_code grant needs at least one --redirect-uri.")
        }
        for uri in new.redirectURIs + new.postLogoutRedirectURIs {
            guard let parsed = URLComponents(string: uri), parsed.scheme != nil, parsed.fragment == nil, !uri.contains(","), !uri.contains(" ") else {
                throw Failure("'\(uri)' is not an absolute URI without a fragment.")
            }
        }
        if let lifespan = new.accessLifespan, !(1...OpenIDProvider.maximumAccessLifetime).contains(lifespan) {
            throw Failure("--access-lifespan is 1 to \(OpenIDProvider.maximumAccessLifetime) seconds.")
        }
        let serviceAccount = new.grantTypes.contains("client_credentials") ? OpenIDProvider.serviceAccount(of: id) : nil
        if let serviceAccount, serviceAccount.count > 40 {
            throw Failure("A client that uses client_credentials has an id of at most \(40 - OpenIDProvider.serviceAccount(of: "").count) characters (its service account is a user name).")
        }
        let secret = new.isPublic ? nil : (new.secret ?? Base64URL.random(bytes: 24))
        if let secret, secret.count < 16 { throw Failure("A client secret has at least 16 characters.") }
        return try await withStore(configuration) { store in
            guard try await OAuthDirectory(store: store).client(clientID: id) == nil else {
                throw Failure("A client with the id '\(id)' already exists.")
            }
            var values: [String: String] = [
                "client_id": id, "name": new.name.isEmpty ? id : new.name, "public_client": new.isPublic ? "true" : "false",
                "grant_types": new.grantTypes.joined(separator: ","), "redirect_url": new.redirectURIs.joined(separator: ","),
                "post_logout_redirect_url": new.postLogoutRedirectURIs.joined(separator: ","),
            ]
            if let secret { values["client_secret"] = secret }
            if let lifespan = new.accessLifespan { values["access_token_lifespan"] = String(lifespan) }
            try await store.insert(into: "oauth_entity", values: values, caller: .system)
            if let serviceAccount, try await UserDirectory(store: store).account(userName: serviceAccount) == nil {
                // The user the client acts as: no password (it cannot sign in), no roles until an admin gives some.
                try await store.insert(
                    into: "sys_user",
                    values: ["user_name": serviceAccount, "first_name": "Service account", "last_name": id, "name": "Service account " + id],
                    caller: .system
                )
            }
            guard let client = try await OAuthDirectory(store: store).client(clientID: id) else { throw Failure("The client was not stored.") }
            return (info(client), secret)
        }
    }

    /// Removes a client; its tokens stop working (ServiceNow's at once, OpenID sessions at their next refresh).
    public static func delete(clientID: String, in configuration: Configuration) async throws {
        try await withStore(configuration) { store in
            guard let client = try await OAuthDirectory(store: store).client(clientID: clientID) else {
                throw Failure("There is no client with the id '\(clientID)'.")
            }
            try await store.delete(client.sysID, from: "oauth_entity", caller: .system)
            try await OpenIDGrants.endSessions(ofClient: clientID, storage: store.storage)
        }
    }

    /// `mobile-services.json` for a public client of this server at `base` (its public URL).
    public static func mobileServices(clientID: String, base: String, in configuration: Configuration) async throws -> String {
        try await withStore(configuration) { store in
            guard let client = try await OAuthDirectory(store: store).client(clientID: clientID), client.active else {
                throw Failure("There is no active client with the id '\(clientID)'.")
            }
            guard client.isPublic else { throw Failure("'\(clientID)' is a confidential client: an app cannot keep its secret.") }
            let variants = try await MobileServices.variants(of: clientID, store: store)
            let key = variants.isEmpty ? nil : try await VAPIDKey.load(storage: store.storage, subject: "mailto:admin@localhost").publicKey
            return try MobileServices.pretty(MobileServices.document(
                base: base, realm: configuration.oidcRealm, clientID: clientID, push: variants, appServerKey: key
            ))
        }
    }

    static func info(_ client: OAuthDirectory.Client) -> ClientInfo {
        ClientInfo(
            clientID: client.clientID, name: client.name, isPublic: client.isPublic, active: client.active,
            grantTypes: client.grantTypes.sorted(), redirectURIs: client.redirectURIs, postLogoutRedirectURIs: client.postLogoutRedirectURIs
        )
    }

    private static func withStore<T: Sendable>(_ configuration: Configuration, _ body: (RecordStore) async throws -> T) async throws -> T {
        try configuration.prepareStorage()
        let logger = Logger(label: "docketd.clients")
        let storage = try await configuration.storageLocation.open(logger: logger)
        let hasher = PasswordHasher(cost: configuration.bcryptCost, threads: 1, queueLimit: 4)
        do {
            let (store, _) = try await RecordStore.open(storage: storage, logger: logger, hashPassword: hasher.hash)
            let result = try await body(store)
            await hasher.shutdown()
            try await storage.close()
            return result
        } catch {
            await hasher.shutdown()
            try? await storage.close()
            throw error
        }
    }
}

/// The AeroGear apps' client configuration (`mobile-services.json`) describing this server: the DataSync GraphQL
/// endpoint (`sync-app`, with its WebSocket URL) and the OpenID provider as a Keycloak installation (`keycloak`).
enum MobileServices {
    /// The document indented, as a file a developer keeps in an app.
    static func pretty(_ document: JSONValue) throws -> String {
        let object = try JSONSerialization.jsonObject(with: Data(document.serialized()))
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }

    /// A push variant of a client, as `mobile-services.json` lists it.
    struct PushVariant: Sendable {
        var platform: String
        var variantID: String
        var secret: String
    }

    /// The active push variants tied to a client (`sys_push_variant.client_id`).
    static func variants(of clientID: String, store: RecordStore) async throws -> [PushVariant] {
        try await store.list(
            RecordQuery(
                table: "sys_push_variant", query: PushSubscriptions.query([("client_id", clientID), ("active", "true")]),
                fields: ["platform", "variant_id", "variant_secret"], limit: 10, count: false
            ),
            caller: .system
        ).records.map { PushVariant(platform: $0["platform"], variantID: $0["variant_id"], secret: $0["variant_secret"]) }
    }

    static func document(
        base: String, realm: String, clientID: String, push: [PushVariant] = [], appServerKey: String? = nil
    ) -> JSONValue {
        let socketBase = base.hasPrefix("https://") ? "wss://" + base.dropFirst(8) : "ws://" + base.dropFirst(base.hasPrefix("http://") ? 7 : 0)
        // AeroGear's push entry: UPS's base URL (docketd's: it serves /rest/registry/device) and a variant per platform.
        var pushConfig: [(String, JSONValue)] = []
        for variant in push {
            var members: [(String, JSONValue)] = [("variantId", .string(variant.variantID)), ("variantSecret", .string(variant.secret))]
            if variant.platform == "web_push", let appServerKey { members.append(("appServerKey", .string(appServerKey))) }
            pushConfig.append((variant.platform, JSONValue(members: members)))
        }
        let pushServices: [JSONValue] = pushConfig.isEmpty ? [] : [.object([
            "id": .string("docket-push"), "name": .string("push"), "type": .string("push"), "url": .string(base),
            "config": JSONValue(members: pushConfig),
        ])]
        return .object([
            "version": .integer(1), "namespace": .string("docket"), "clientId": .string(clientID),
            "services": .array(pushServices + [
                .object([
                    "id": .string("docket-sync-app"), "name": .string("sync-app"), "type": .string("sync-app"),
                    "url": .string(base + "/graphql"), "config": .object(["websocketUrl": .string(socketBase + "/graphql")]),
                ]),
                .object([
                    "id": .string("docket-keycloak"), "name": .string("keycloak"), "type": .string("keycloak"), "url": .string(base),
                    "config": .object([
                        "auth-server-url": .string(base), "realm": .string(realm), "resource": .string(clientID),
                        "public-client": .bool(true), "ssl-required": .string("external"), "confidential-port": .integer(0),
                    ]),
                ]),
            ]),
        ])
    }
}
