import ArgumentParser
import DocketServer
import Foundation

struct Clients: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clients",
        abstract: "Register the apps that sign users in: OAuth and OpenID Connect clients.",
        discussion: """
            Clients are records of oauth_entity, shared by ServiceNow's /oauth_token.do and the OpenID provider \
            (/realms/<realm>). A public client (a phone, desktop or command-line app) keeps no secret and must use \
            PKCE; a confidential one (a server) authenticates with its secret, which is printed once when it is made. \
            Examples:
              docketd clients create tasks-ios --public --grant authorization_code --grant refresh_token \\
                  --redirect-uri com.example.tasks:/oauth2redirect
              docketd clients create reports --grant client_credentials
              docketd clients list
              docketd clients delete tasks-ios
            """,
        subcommands: [ListClients.self, CreateClient.self, DeleteClient.self]
    )
}

struct ListClients: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "Show the registered clients.")

    @OptionGroup var location: StorageOptions

    func run() async throws {
        let configuration = try location.configuration()
        let clients = try await explainingFailures { try await ClientAdministration.list(in: configuration) }
        func pad(_ text: String, _ width: Int) -> String { text.padding(toLength: max(width, text.count), withPad: " ", startingAt: 0) }
        print([pad("CLIENT ID", 26), pad("TYPE", 12), pad("GRANTS", 44), "REDIRECT URIS"].joined(separator: " "))
        for client in clients {
            print([
                pad(client.clientID, 26), pad(client.active ? (client.isPublic ? "public" : "confidential") : "inactive", 12),
                pad(client.grantTypes.joined(separator: ","), 44), client.redirectURIs.joined(separator: " "),
            ].joined(separator: " "))
        }
    }
}

struct CreateClient: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "create", abstract: "Register a client.")

    @OptionGroup var location: StorageOptions

    @Argument(help: "The client id apps send (client_id).")
    var clientID: String

    @Option(help: "A name people see (default: the client id).")
    var name: String = ""

    @Flag(name: .customLong("public"), help: "An app that cannot keep a secret: no secret, PKCE required.")
    var isPublic = false

    @Option(help: "The secret of a confidential client, at least 16 characters (default: one is made and printed).")
    var secret: String?

    @Option(name: .customLong("grant"), help: "A grant the client may use (repeatable): authorization_code, refresh_token, password, client_credentials, urn:ietf:params:oauth:grant-type:device_code (default: password and refresh_token).")
    var grants: [String] = []

    @Option(name: .customLong("redirect-uri"), help: "Where sign-in may return to (repeatable): an exact URI, a prefix ending in *, or a loopback http://127.0.0.1/path (any port).")
    var redirectURIs: [String] = []

    @Option(name: .customLong("post-logout-redirect-uri"), help: "Where sign-out may return to (repeatable).")
    var postLogoutRedirectURIs: [String] = []

    @Option(help: "Seconds an access token lives (default 1800).")
    var accessLifespan: Int?

    func run() async throws {
        let configuration = try location.configuration()
        let (client, secret) = try await explainingFailures {
            try await ClientAdministration.create(
                .init(
                    clientID: clientID, name: name, isPublic: isPublic, secret: self.secret, grantTypes: grants, redirectURIs: redirectURIs,
                    postLogoutRedirectURIs: postLogoutRedirectURIs, accessLifespan: accessLifespan
                ),
                in: configuration
            )
        }
        print("Created \(client.isPublic ? "public" : "confidential") client \(client.clientID) (grants: \(client.grantTypes.joined(separator: ", "))).")
        if let secret, self.secret == nil { print("Its secret, shown only now: \(secret)") }
    }
}

struct DeleteClient: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Remove a client; its sign-ins end.")

    @OptionGroup var location: StorageOptions

    @Argument(help: "The client id.")
    var clientID: String

    func run() async throws {
        let configuration = try location.configuration()
        try await explainingFailures { try await ClientAdministration.delete(clientID: clientID, in: configuration) }
        print("Deleted client \(clientID).")
    }
}

struct MobileConfig: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mobile-config",
        abstract: "Print mobile-services.json for an app: where its GraphQL API and its sign-in (as a Keycloak realm) are.",
        discussion: """
            The AeroGear apps (the DataSync showcase) read this file to find the server; a running docketd serves \
            the same at /mobile-services.json?client_id=<id>. Example:
              docketd mobile-config --client-id datasync-starter-client --public-url https://tasks.example.com
            """
    )

    @OptionGroup var location: StorageOptions

    @Option(help: "The app's public client id.")
    var clientID: String

    @Option(help: "The server's address as apps reach it (env DOCKET_PUBLIC_URL).")
    var publicURL: String?

    @Option(help: "The OpenID realm (env DOCKET_OIDC_REALM; default docket).")
    var oidcRealm: String?

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard var base = publicURL ?? environment["DOCKET_PUBLIC_URL"], base.hasPrefix("http://") || base.hasPrefix("https://") else {
            throw ValidationError("Give the server's address as apps reach it: --public-url https://… (or DOCKET_PUBLIC_URL).")
        }
        while base.hasSuffix("/") { base.removeLast() }
        var configuration = try location.configuration()
        configuration.oidcRealm = oidcRealm ?? environment["DOCKET_OIDC_REALM"] ?? "docket"
        let text = try await explainingFailures {
            try await ClientAdministration.mobileServices(clientID: clientID, base: base, in: configuration)
        }
        print(text)
    }
}
