import ArgumentParser
import DocketServer
import DocketModel
import Foundation
import Hummingbird
import Logging

@main
struct Docketd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docketd",
        abstract: "Docket's server: a self-hosted work tracker that speaks ServiceNow's REST APIs.",
        discussion: """
            `docketd` alone (or `docketd serve`) runs the server; see `docketd serve --help` for its options. \
            `docketd users create` adds an account to a data folder, such as the first administrator of a server \
            started without --demo. `docketd clients` registers the apps that sign users in (OAuth and OpenID \
            Connect clients), and `docketd mobile-config` prints an app's mobile-services.json. `docketd keys rotate` \
            adds new keys for signing tokens (`docketd keys list` shows them). `docketd migrate` copies a whole \
            database into an empty one (SQLite to PostgreSQL). `docketd backup` and `docketd restore` save and put \
            back an SQLite database.
            """,
        version: DocketVersion.current,
        subcommands: [Serve.self, Users.self, Clients.self, Keys.self, MobileConfig.self, Migrate.self, Backup.self, Restore.self],
        defaultSubcommand: Serve.self
    )
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the APIs (the default command).",
        discussion: """
            Table, My Work, Attachment, Aggregate (stats) and Batch APIs, with Basic, session-cookie and OAuth 2.0 \
            (/oauth_token.do) authentication. Each option can also be set with the environment variable shown; an \
            option on the command line wins.

            Data lives in one SQLite file inside the data folder, or in a PostgreSQL database given with --database \
            (several docketd may share one). With --demo, a new database is seeded with demo \
            users (admin/admin, john.doe/password, beth.anglin/password, abel.tuter/password), records, and an \
            OAuth client (client_id docket-demo, secret docket-demo-secret). More OAuth clients are records of the \
            oauth_entity table.

            Without --demo a new data folder has no users. Create the first administrator with \
            `docketd users create --admin <user name> --data-dir <folder>`, or set DOCKET_ADMIN_USER and \
            DOCKET_ADMIN_PASSWORD for a start that finds nobody who can log in.

            With --tls-cert and --tls-key docketd serves HTTPS only: HTTP/2 when the client offers it by ALPN, \
            HTTP/1.1 otherwise.

            When ready, docketd prints one line to standard output: "docketd listening on http://HOST:PORT" \
            (https:// with TLS). Logs go to standard error. SIGINT or SIGTERM shuts it down cleanly.
            """
    )

    @Option(help: "Address to listen on (env DOCKET_HOST; default 127.0.0.1).")
    var host: String?

    @Option(help: "Port to listen on; 0 picks a free port (env DOCKET_PORT; default 8080).")
    var port: Int?

    @Option(name: .customLong("data-dir"), help: "Folder for the database (env DOCKET_DATA_DIR; default ./.docket).")
    var dataDirectory: String?

    @Option(help: "The database: sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE[?schema=S&sslmode=M&prepare=on|off] (env DOCKET_DATABASE_URL; default the SQLite file docket.sqlite in the data folder).")
    var database: String?

    @Flag(help: "Seed demo data when the database is new (env DOCKET_DEMO=1).")
    var demo = false

    @Option(help: "trace, debug, info, notice, warning, error or critical (env DOCKET_LOG_LEVEL; default info).")
    var logLevel: String?

    @Option(help: "text (one readable line each, the default) or json (one JSON object a line: time, level, message, request_id, user, dialect, route, status, duration_ms) (env DOCKET_LOG_FORMAT).")
    var logFormat: String?

    @Option(help: "Serve Prometheus metrics at /metrics on a listener of its own at this port; 0 picks a free one (env DOCKET_METRICS_PORT). docketd prints \"docketd metrics listening on http://HOST:PORT\" when it is ready.")
    var metricsPort: Int?

    @Option(help: "Address of the metrics listener (env DOCKET_METRICS_HOST; default 127.0.0.1: only this machine).")
    var metricsHost: String?

    @Option(help: "Serve /metrics on the main port too, to requests with 'Authorization: Bearer TOKEN'; with --metrics-port, that listener asks for it as well. Prefer the environment variable: a command line shows in ps (env DOCKET_METRICS_TOKEN).")
    var metricsToken: String?

    @Option(help: "Export OpenTelemetry traces (a span per request, with its storage, access checks and live fan-out) over OTLP/HTTP to this collector, e.g. http://localhost:4318; the caller's traceparent is honoured. OTEL_EXPORTER_OTLP_HEADERS, OTEL_TRACES_SAMPLER and the other OTEL_* variables refine it (env DOCKET_OTEL_ENDPOINT).")
    var otelEndpoint: String?

    @Option(help: "External base URL used in links, e.g. https://docket.example.com (env DOCKET_PUBLIC_URL).")
    var publicURL: String?

    @Option(
        name: .customLong("tls-cert"),
        help: "PEM certificate chain; with --tls-key, serve HTTPS only, HTTP/1.1 and HTTP/2 (env DOCKET_TLS_CERT)."
    )
    var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: "PEM private key for --tls-cert (env DOCKET_TLS_KEY).")
    var tlsKey: String?

    @Option(
        name: .customLong("tls-client-ca"),
        help: "PEM certificates of authorities whose client certificates sign in, as registered with `docketd users certificate` (env DOCKET_TLS_CLIENT_CA)."
    )
    var tlsClientCA: String?

    @Option(help: "Largest attachment accepted, in bytes (env DOCKET_MAX_ATTACHMENT_SIZE; default 20971520).")
    var maxAttachmentSize: Int?

    @Option(help: "Bytes all attachments of one record may hold together; 0 for no limit (env DOCKET_ATTACHMENT_QUOTA_PER_RECORD; default 104857600).")
    var attachmentQuotaPerRecord: Int?

    @Option(help: "Bytes all attachments one non-admin user uploaded may hold together; 0 for no limit (env DOCKET_ATTACHMENT_QUOTA_PER_USER; default 1073741824).")
    var attachmentQuotaPerUser: Int?

    @Option(help: "Attachment uploads received at once; more are answered 503 with Retry-After before their body is read (env DOCKET_CONCURRENT_UPLOADS; default 8). One user may send 2 at a time, or a quarter of these if more.")
    var concurrentUploads: Int?

    @Option(help: "Days the event log keeps changes for followers to resume from (env DOCKET_EVENT_LOG_RETENTION_DAYS; default 7).")
    var eventLogRetentionDays: Int?

    @Option(help: "The most changes the event log keeps (env DOCKET_EVENT_LOG_MAX_EVENTS; default 1000000).")
    var eventLogMaxEvents: Int?

    @Option(help: "The most changes a live event stream or GraphQL subscription may replay from where it resumes; one further behind is told to resync, reading the current state again (env DOCKET_LIVE_REPLAY_MAX_EVENTS; default 50000).")
    var liveReplayMaxEvents: Int?

    @Option(help: "Seconds between heartbeats of live event streams and GraphQL sockets, each also checking that the subscriber's session or token still holds (env DOCKET_LIVE_HEARTBEAT_SECONDS; default 15).")
    var liveHeartbeatSeconds: Int?

    @Option(help: "Live event streams and GraphQL subscriptions one user may hold open at once (env DOCKET_LIVE_STREAMS_PER_USER; default 16).")
    var liveStreamsPerUser: Int?

    @Option(help: "Megabytes of rendered Table API list pages kept to answer the same caller's same request again while nothing has been written since (any change ends them all); 0 keeps none (env DOCKET_LIST_CACHE_MB; default 64).")
    var listCacheMb: Int?

    @Option(name: .customLong("oidc-trust"), help: "Accept bearer tokens of an outside OpenID provider: 'ISSUER,audience=AUD[,username=CLAIM][,roles=CLAIM][,client=ID][,secret-env=VAR][,name=LABEL]' (repeatable; env DOCKET_OIDC_TRUST, issuers separated by ';'). audience= is required (without it, tokens must be issued to client=ID). A token signs in as the account its issuer and subject (sub) are linked to: linked on first sight only when the provider verified an e-mail one account has (never an administrator's), or by docketd users link. With client=ID the web UI offers \"Sign in with LABEL\" through that provider.")
    var oidcTrust: [String] = []

    @Flag(name: .customLong("oidc-provision"), help: "Give a trusted provider's person who is linked to no account an account of their own on first sight, named by the username claim when no account has that name, with the roles of its roles claim that exist here (never admin) (env DOCKET_OIDC_PROVISION=1).")
    var oidcProvision = false

    @Flag(name: .customLong("push-allow-insecure-endpoints"), help: "Let push subscriptions use http:// endpoints and loopback or private addresses (closed networks and tests; env DOCKET_PUSH_ALLOW_INSECURE_ENDPOINTS=1). Without it docketd sends notifications only to public HTTPS endpoints. Link-local and cloud metadata addresses are refused either way.")
    var pushAllowInsecureEndpoints = false

    @Option(name: .customLong("push-contact"), help: "Whom push services may contact about docketd's notifications (VAPID subject): a mailto: or https: URL (env DOCKET_PUSH_CONTACT; default the public URL).")
    var pushContact: String?

    @Option(name: .customLong("apns-key-file"), help: "Send notifications to Apple devices: the APNs auth key (AuthKey_XXXXXXXXXX.p8) from Apple's developer site (env DOCKET_APNS_KEY_FILE). Needs --apns-key-id, --apns-team-id and --apns-topic.")
    var apnsKeyFile: String?

    @Option(name: .customLong("apns-key-id"), help: "The APNs key's 10-character id (env DOCKET_APNS_KEY_ID).")
    var apnsKeyID: String?

    @Option(name: .customLong("apns-team-id"), help: "Your Apple team id (env DOCKET_APNS_TEAM_ID).")
    var apnsTeamID: String?

    @Option(name: .customLong("apns-topic"), help: "The app's bundle id, APNs' topic (env DOCKET_APNS_TOPIC).")
    var apnsTopic: String?

    @Option(name: .customLong("apns-environment"), help: "sandbox for development builds of the app, production otherwise (env DOCKET_APNS_ENVIRONMENT; default production).")
    var apnsEnvironment: String?

    @Option(name: .customLong("apns-url"), help: "Send to this APNs gateway instead of Apple's (tests, private relays; env DOCKET_APNS_URL).")
    var apnsURL: String?

    @Option(name: .customLong("apns-ca-file"), help: "PEM certificate of the authority to trust for --apns-url (env DOCKET_APNS_CA_FILE).")
    var apnsCAFile: String?

    @Option(help: "The realm of docketd's OpenID Connect provider: its issuer is <public URL>/realms/<realm>, as a Keycloak realm's (env DOCKET_OIDC_REALM; default docket).")
    var oidcRealm: String?

    @Option(help: "Seconds a connection may go without a complete request head before it is closed, idle keep-alive included (env DOCKET_IDLE_TIMEOUT; default 30).")
    var idleTimeout: Int?

    @Option(help: "Threads that check passwords (bcrypt), apart from request handling (env DOCKET_PASSWORD_HASH_THREADS; default half the processors).")
    var passwordHashThreads: Int?

    @Option(help: "Failed logins of one user name from one address before each further failure doubles the wait (env DOCKET_LOGIN_FREE_FAILURES; default 5).")
    var loginFreeFailures: Int?

    @Option(help: "Failed logins from one address, whatever the user names, before each further failure doubles the wait (env DOCKET_LOGIN_FREE_ADDRESS_FAILURES; default 50).")
    var loginFreeAddressFailures: Int?

    @Option(help: "Milliseconds a refused (throttled) login waits before its 429 is sent, at most its Retry-After; 0 answers at once (env DOCKET_LOGIN_REFUSAL_DELAY_MS; default 1000).")
    var loginRefusalDelayMs: Int?

    @Option(help: "Longest wait, in seconds, that failed logins impose: a temporary lock (env DOCKET_LOGIN_MAX_DELAY; default 900).")
    var loginMaxDelay: Int?

    /// A positive whole number from a flag or an environment variable.
    private func number(_ flag: Int?, _ variable: String, _ environment: [String: String], default value: Int, name: String)
        throws -> Int
    {
        let text = flag.map(String.init) ?? environment[variable] ?? String(value)
        guard let number = Int(text), number > 0 else {
            throw ValidationError("\(name) must be a positive whole number, not '\(text)'.")
        }
        return number
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let levelName = logLevel ?? environment["DOCKET_LOG_LEVEL"] ?? "info"
        guard let level = Logger.Level(rawValue: levelName.lowercased()) else {
            throw ValidationError("Unknown log level '\(levelName)'. Use trace, debug, info, notice, warning, error or critical.")
        }
        let portText = port.map(String.init) ?? environment["DOCKET_PORT"] ?? "8080"
        guard let port = Int(portText), (0...65_535).contains(port) else {
            throw ValidationError("Port must be a number from 0 to 65535, not '\(portText)'.")
        }
        let format = (logFormat ?? environment["DOCKET_LOG_FORMAT"] ?? "text").lowercased()
        guard format == "text" || format == "json" else {
            throw ValidationError("--log-format is text or json, not '\(format)'.")
        }
        LoggingSystem.bootstrap { label in
            if format == "json" {
                var handler = JSONLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
            var handler = TextLogHandler(label: label)
            handler.logLevel = level
            return handler
        }
        let certificate = tlsCertificate ?? environment["DOCKET_TLS_CERT"]
        let key = tlsKey ?? environment["DOCKET_TLS_KEY"]
        guard (certificate == nil) == (key == nil) else {
            throw ValidationError("HTTPS needs both --tls-cert and --tls-key (or DOCKET_TLS_CERT and DOCKET_TLS_KEY).")
        }
        let clientCA = tlsClientCA ?? environment["DOCKET_TLS_CLIENT_CA"]
        guard clientCA == nil || certificate != nil else {
            throw ValidationError("Client certificates (--tls-client-ca) need HTTPS: give --tls-cert and --tls-key too.")
        }
        let attachmentText = maxAttachmentSize.map(String.init) ?? environment["DOCKET_MAX_ATTACHMENT_SIZE"] ?? "20971520"
        guard let attachmentLimit = Int(attachmentText), attachmentLimit > 0 else {
            throw ValidationError("The attachment size limit must be a positive number of bytes, not '\(attachmentText)'.")
        }
        let idle = try number(idleTimeout, "DOCKET_IDLE_TIMEOUT", environment, default: 30, name: "--idle-timeout")
        var hashThreads: Int? = nil
        if passwordHashThreads != nil || environment["DOCKET_PASSWORD_HASH_THREADS"] != nil {
            hashThreads = try number(
                passwordHashThreads, "DOCKET_PASSWORD_HASH_THREADS", environment, default: 1, name: "--password-hash-threads"
            )
        }
        let freeFailures = try number(
            loginFreeFailures, "DOCKET_LOGIN_FREE_FAILURES", environment, default: 5, name: "--login-free-failures"
        )
        let maxDelay = try number(loginMaxDelay, "DOCKET_LOGIN_MAX_DELAY", environment, default: 900, name: "--login-max-delay")
        let freeAddressFailures = try number(
            loginFreeAddressFailures, "DOCKET_LOGIN_FREE_ADDRESS_FAILURES", environment, default: 50,
            name: "--login-free-address-failures"
        )
        let refusalText = loginRefusalDelayMs.map(String.init) ?? environment["DOCKET_LOGIN_REFUSAL_DELAY_MS"] ?? "1000"
        guard let refusalDelay = Int(refusalText), (0...60_000).contains(refusalDelay) else {
            throw ValidationError("--login-refusal-delay-ms must be 0 to 60000 milliseconds, not '\(refusalText)'.")
        }
        var configuration = Configuration(
            host: host ?? environment["DOCKET_HOST"] ?? "127.0.0.1",
            port: port,
            dataDirectory: dataDirectory ?? environment["DOCKET_DATA_DIR"] ?? "./.docket",
            demo: demo || ["1", "true", "yes"].contains(environment["DOCKET_DEMO"]?.lowercased() ?? ""),
            logLevel: level,
            publicURL: publicURL ?? environment["DOCKET_PUBLIC_URL"],
            maxAttachmentSize: attachmentLimit, tlsCertificatePath: certificate, tlsKeyPath: key,
            idleTimeout: .seconds(idle), passwordHashThreads: hashThreads,
            loginThrottle: LoginThrottlePolicy(
                userFailures: freeFailures, addressFailures: freeAddressFailures, maximumDelay: .seconds(maxDelay)
            )
        )
        for (flag, variable, name, apply) in [
            (attachmentQuotaPerRecord, "DOCKET_ATTACHMENT_QUOTA_PER_RECORD", "--attachment-quota-per-record",
             { (configuration: inout Configuration, value: Int?) in configuration.attachmentQuotaPerRecord = value }),
            (attachmentQuotaPerUser, "DOCKET_ATTACHMENT_QUOTA_PER_USER", "--attachment-quota-per-user",
             { (configuration: inout Configuration, value: Int?) in configuration.attachmentQuotaPerUser = value }),
        ] {
            guard let text = flag.map(String.init) ?? environment[variable] else { continue }
            guard let bytes = Int(text), bytes >= 0 else {
                throw ValidationError("\(name) must be a number of bytes (0 for no limit), not '\(text)'.")
            }
            apply(&configuration, bytes == 0 ? nil : bytes)
        }
        configuration.tlsClientCAPath = clientCA
        configuration.loginThrottle.throttledAnswerDelay = .milliseconds(refusalDelay)
        configuration.eventLogRetention = .seconds(
            86_400 * min(36_500, try number(eventLogRetentionDays, "DOCKET_EVENT_LOG_RETENTION_DAYS", environment, default: 7, name: "--event-log-retention-days"))
        )
        configuration.eventLogMaxEvents = try number(
            eventLogMaxEvents, "DOCKET_EVENT_LOG_MAX_EVENTS", environment, default: 1_000_000, name: "--event-log-max-events"
        )
        configuration.liveHeartbeat = .seconds(min(86_400, try number(
            liveHeartbeatSeconds, "DOCKET_LIVE_HEARTBEAT_SECONDS", environment, default: 15, name: "--live-heartbeat-seconds"
        )))
        configuration.concurrentUploads = max(1, try number(
            concurrentUploads, "DOCKET_CONCURRENT_UPLOADS", environment, default: 8, name: "--concurrent-uploads"
        ))
        configuration.concurrentUploadsPerUser = max(2, configuration.concurrentUploads / 4)
        configuration.liveReplayMaxEvents = try number(
            liveReplayMaxEvents, "DOCKET_LIVE_REPLAY_MAX_EVENTS", environment, default: 50_000,
            name: "--live-replay-max-events"
        )
        configuration.liveStreamsPerUser = try number(
            liveStreamsPerUser, "DOCKET_LIVE_STREAMS_PER_USER", environment, default: 16, name: "--live-streams-per-user"
        )
        let listCache = listCacheMb.map { String($0) } ?? environment["DOCKET_LIST_CACHE_MB"] ?? "64"
        guard let megabytes = Int(listCache), (0...65_536).contains(megabytes) else {
            throw ValidationError("--list-cache-mb must be a whole number from 0 to 65536, not '\(listCache)'.")
        }
        configuration.listCacheBytes = megabytes << 20
        let realm = oidcRealm ?? environment["DOCKET_OIDC_REALM"] ?? "docket"
        guard !realm.isEmpty, realm.utf8.count <= 64,
            realm.unicodeScalars.allSatisfy({ CharacterSet.alphanumerics.contains($0) || $0 == "-" || $0 == "_" || $0 == "." })
        else {
            throw ValidationError("--oidc-realm must be 1 to 64 letters, digits, '-', '_' or '.', not '\(realm)'.")
        }
        configuration.oidcRealm = realm
        let trusted = oidcTrust.isEmpty
            ? (environment["DOCKET_OIDC_TRUST"] ?? "").split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            : oidcTrust
        do {
            configuration.oidcTrust = try trusted.map { text throws(TrustedIssuerError) in try TrustedIssuer.parse(text) }
        } catch {
            throw ValidationError("--oidc-trust: \(error.description)")
        }
        configuration.oidcProvision = oidcProvision || ["1", "true", "yes"].contains(environment["DOCKET_OIDC_PROVISION"]?.lowercased() ?? "")
        configuration.pushAllowInsecureEndpoints = pushAllowInsecureEndpoints
            || ["1", "true", "yes"].contains(environment["DOCKET_PUSH_ALLOW_INSECURE_ENDPOINTS"]?.lowercased() ?? "")
        let apnsValues = [
            ("--apns-key-file", apnsKeyFile ?? environment["DOCKET_APNS_KEY_FILE"]), ("--apns-key-id", apnsKeyID ?? environment["DOCKET_APNS_KEY_ID"]),
            ("--apns-team-id", apnsTeamID ?? environment["DOCKET_APNS_TEAM_ID"]), ("--apns-topic", apnsTopic ?? environment["DOCKET_APNS_TOPIC"]),
        ].map { ($0.0, $0.1.flatMap { $0.isEmpty ? nil : $0 }) }
        let apnsGiven = apnsValues.filter { $0.1 != nil }
        if !apnsGiven.isEmpty {
            let missing = apnsValues.filter { $0.1 == nil }.map(\.0)
            guard missing.isEmpty else {
                throw ValidationError("Sending to Apple devices needs \(missing.joined(separator: ", ")) too.")
            }
            let apnsEnvironment = (self.apnsEnvironment ?? environment["DOCKET_APNS_ENVIRONMENT"] ?? "production").lowercased()
            guard apnsEnvironment == "sandbox" || apnsEnvironment == "production" else {
                throw ValidationError("--apns-environment is sandbox or production, not '\(apnsEnvironment)'.")
            }
            let url = apnsURL ?? environment["DOCKET_APNS_URL"]
            if let url, !(url.hasPrefix("https://") && URL(string: url)?.host != nil) {
                throw ValidationError("--apns-url must be an https:// URL, not '\(url)'.")
            }
            let apns = APNsConfiguration(
                keyFile: apnsValues[0].1!, keyID: apnsValues[1].1!, teamID: apnsValues[2].1!, topic: apnsValues[3].1!,
                environment: apnsEnvironment, url: url, caFile: apnsCAFile ?? environment["DOCKET_APNS_CA_FILE"]
            )
            do {
                try apns.check()
            } catch {
                throw ValidationError(String(describing: error))
            }
            configuration.apns = apns
        }
        if let contact = pushContact ?? environment["DOCKET_PUSH_CONTACT"], !contact.isEmpty {
            guard contact.hasPrefix("mailto:") || contact.hasPrefix("https://"), contact.utf8.count <= 255 else {
                throw ValidationError("--push-contact must be a mailto: or https: URL, not '\(contact)'.")
            }
            configuration.pushContact = contact
        }
        if let user = environment["DOCKET_ADMIN_USER"], !user.isEmpty {
            guard let password = environment["DOCKET_ADMIN_PASSWORD"], !password.isEmpty else {
                throw ValidationError("DOCKET_ADMIN_USER needs DOCKET_ADMIN_PASSWORD too.")
            }
            configuration.initialAdmin = (user, password)
        }
        if let text = metricsPort.map({ String($0) }) ?? environment["DOCKET_METRICS_PORT"] {
            guard let port = Int(text), (0...65_535).contains(port) else {
                throw ValidationError("--metrics-port must be a number from 0 to 65535, not '\(text)'.")
            }
            guard port == 0 || port != configuration.port else {
                throw ValidationError("--metrics-port must differ from --port (\(port)).")
            }
            configuration.metricsPort = port
            configuration.metricsHost = metricsHost ?? environment["DOCKET_METRICS_HOST"] ?? "127.0.0.1"
            try await ListenAddress.check(host: configuration.metricsHost, port: port)
            let metricsHost = configuration.metricsHost
            configuration.onMetricsListening = { port in
                FileHandle.standardOutput.write(Data("docketd metrics listening on http://\(metricsHost):\(port)\n".utf8))
            }
        }
        if configuration.metricsPort == nil, let host = metricsHost ?? environment["DOCKET_METRICS_HOST"], !host.isEmpty {
            throw ValidationError("--metrics-host '\(host)' needs --metrics-port (the metrics listener it places).")
        }
        if let token = metricsToken ?? environment["DOCKET_METRICS_TOKEN"], !token.isEmpty {
            guard token.utf8.count >= 16, token.utf8.allSatisfy({ $0 > 32 && $0 < 127 }) else {
                throw ValidationError("--metrics-token must be at least 16 printable characters without spaces.")
            }
            configuration.metricsToken = token
        }
        if let endpoint = otelEndpoint ?? environment["DOCKET_OTEL_ENDPOINT"], !endpoint.isEmpty {
            _ = try TraceExport.tracesURL(endpoint)
            configuration.otelEndpoint = endpoint
        }
        configuration.database = try databaseLocation(database ?? environment["DOCKET_DATABASE_URL"])
        // The port is checked before the data folder is touched: a failed start writes nothing.
        // A StartupFailure is a sentence to act on: printed as it is, without the usage text.
        try await ListenAddress.check(host: configuration.host, port: configuration.port)
        try configuration.prepareStorage()
        let host = configuration.host
        let configuredPort = configuration.port
        let scheme = configuration.usesTLS ? "https" : "http"
        let app: any ApplicationProtocol
        do {
            app = try await explainingFailures {
                try await buildApplication(configuration) { channel in
                    let actualPort = channel.localAddress?.port ?? configuredPort
                    // Written in one call, unbuffered, so scripts waiting for this line see it at once.
                    FileHandle.standardOutput.write(Data("docketd listening on \(scheme)://\(host):\(actualPort)\n".utf8))
                }
            }
        } catch let failure as TLSSetup.Failure {
            throw ValidationError(failure.description)
        }
        try await serveUntilSignalled(app, logger: app.logger)
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Copy a whole database into an empty one, e.g. from SQLite to PostgreSQL.",
        discussion: """
            Every table and row is copied in one transaction on the target: records, journals, attachments and \
            their content, users, sessions, OAuth clients and tokens, the event log with its sequence numbers (so \
            live clients resume across the move), schema metadata and tables an administrator added. The source is \
            never written, and every row comes from one snapshot of it: an SQLite source is first copied to a \
            temporary file (and, when an older docketd made it, brought up to this docketd's schema there); a \
            PostgreSQL source is read in one repeatable-read transaction and must have this docketd's schema. \
            Writes made to the source meanwhile are not copied, so stop every docketd that serves it first. The \
            target must hold no Docket database yet; on failure nothing is written to it. \
            Example: docketd migrate --from sqlite:/var/lib/docket/docket.sqlite \
            --to 'postgres://docket:SECRET@db:5432/docket'
            """
    )

    @Option(help: "The database to copy: sqlite:PATH or postgres://… (default: the SQLite file in --data-dir).")
    var from: String?

    @Option(name: .customLong("data-dir"), help: "Data folder whose docket.sqlite is the source when --from is not given (env DOCKET_DATA_DIR; default ./.docket).")
    var dataDirectory: String?

    @Option(help: "The empty database to copy into: postgres://USER:PASSWORD@HOST:PORT/DATABASE[?schema=S] or sqlite:PATH.")
    var to: String

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let source: StorageLocation
        let target: StorageLocation
        let folder = Configuration(dataDirectory: dataDirectory ?? environment["DOCKET_DATA_DIR"] ?? "./.docket")
        source = try databaseLocation(from) ?? folder.storageLocation
        target = try databaseLocation(to) ?? folder.storageLocation
        guard target != source else { throw ValidationError("--to names the database being copied; give an empty one.") }
        if case .sqlite(let path) = source, !FileManager.default.fileExists(atPath: path) {
            throw ValidationError("There is no database at \(path).")
        }
        var logger = Logger(label: "docketd.migrate")
        logger.logLevel = .warning
        let report = try await explainingFailures {
            try await DatabaseCopy.copy(from: source, to: target, logger: logger) { table, rows in
                FileHandle.standardError.write(Data("  \(table): \(rows) rows\n".utf8))
            }
        }
        print("Copied \(report.totalRows) rows in \(report.rows.count) tables from \(source.redacted) to \(target.redacted).")
    }
}

struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "List or rotate the keys tokens are signed with.",
        discussion: """
            Compass login tokens and the OpenID provider's access and ID tokens are JWTs whose header names the key \
            that signed them: HS512 keys (a shared secret) sign Compass's, RS256 keys (RSA, published at the realm's \
            certs endpoint) sign OpenID's. `docketd keys rotate` adds a new key of each kind that signs from a minute \
            later (every running docketd sharing the database loads and publishes it before then); a key it \
            replaces keeps verifying the tokens it signed until they expire (a day at most), and is removed by a \
            later rotation. Example: docketd keys rotate --data-dir /var/lib/docket
            """,
        subcommands: [ListKeys.self, RotateKeys.self]
    )

    static func print(_ keys: [KeyAdministration.KeyInfo]) {
        let format = ISO8601DateFormatter()
        func pad(_ text: String, _ width: Int) -> String { text.padding(toLength: max(width, text.count), withPad: " ", startingAt: 0) }
        Swift.print([pad("KEY", 43), pad("ALG", 6), pad("STATE", 8), pad("SIGNS FROM", 20), "VERIFIES UNTIL"].joined(separator: " "))
        for key in keys {
            Swift.print([
                pad(key.id, 43), pad(key.algorithm, 6), pad(key.state(), 8),
                pad(key.signsFrom.timeIntervalSince1970 == 0 ? "from the start" : format.string(from: key.signsFrom), 20),
                key.verifiesUntil.map(format.string(from:)) ?? "while it signs",
            ].joined(separator: " "))
        }
    }
}

struct ListKeys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "Show the signing keys, oldest first.")

    @OptionGroup var location: StorageOptions

    func run() async throws {
        let configuration = try location.configuration()
        Keys.print(try await explainingFailures { try await KeyAdministration.list(in: configuration) })
    }
}

struct RotateKeys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate", abstract: "Add a new signing key; the current one keeps verifying its tokens until they expire."
    )

    @OptionGroup var location: StorageOptions

    @Option(help: "Seconds before the new key starts signing; running servers load keys at least every 30 s (default 60).")
    var lead: Int = 60

    func run() async throws {
        guard (0...86_400).contains(lead) else { throw ValidationError("--lead is 0 to 86400 seconds.") }
        let configuration = try location.configuration()
        let keys = try await explainingFailures { try await KeyAdministration.rotate(in: configuration, lead: lead) }
        Keys.print(keys)
        for new in keys where new.state() == "next" {
            Swift.print("\nNew \(new.algorithm) key \(new.id) signs from \(ISO8601DateFormatter().string(from: new.signsFrom)).")
        }
    }
}

struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Save a consistent copy of the SQLite database, while docketd serves it.",
        discussion: """
            The copy is one snapshot (SQLite's VACUUM INTO in one read transaction): every write acknowledged up to \
            the event-log sequence printed is in it, whatever docketd is doing meanwhile. It is checked (PRAGMA \
            integrity_check) before it takes the name given. For PostgreSQL use pg_dump (docs/deployment.md). \
            Example: docketd backup --data-dir /var/lib/docket --to /backups/docket-$(date +%F).sqlite
            """
    )

    @OptionGroup var location: StorageOptions

    @Option(help: "The file to write; refused when it exists, unless --force.")
    var to: String

    @Flag(help: "Replace the file --to names when it exists.")
    var force = false

    func run() async throws {
        let configuration = try location.configuration()
        var logger = Logger(label: "docketd.backup")
        logger.logLevel = .warning
        let summary = try await explainingFailures {
            try await DatabaseBackup.backup(configuration.storageLocation, to: to, force: force, logger: logger)
        }
        print("Backed up \(configuration.storageLocation.redacted) to \(summary.path): \(summary.bytes) bytes, event log up to sequence \(summary.eventSequence), schema version \(summary.schemaVersion).")
    }
}

struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Put a backup in place of the SQLite database (docketd stopped).",
        discussion: """
            The backup is checked first (integrity, a Docket database, a schema this docketd knows). A database that \
            already holds anything is replaced only with --force. Stop every docketd that serves the database first; \
            started again, it serves the backup's records, and live clients resume from the backup's event log \
            (or are told to resync when it no longer reaches their position). For PostgreSQL use pg_restore. \
            Example: docketd restore --data-dir /var/lib/docket --from /backups/docket-2026-11-26.sqlite --force
            """
    )

    @OptionGroup var location: StorageOptions

    @Option(help: "The backup file to restore.")
    var from: String

    @Flag(help: "Replace a database that already holds data.")
    var force = false

    func run() async throws {
        let configuration = try location.configuration(mustExist: false)
        try configuration.prepareStorage()
        var logger = Logger(label: "docketd.restore")
        logger.logLevel = .warning
        let summary = try await explainingFailures {
            try await DatabaseBackup.restore(from: from, to: configuration.storageLocation, force: force, logger: logger)
        }
        print("Restored \(from) to \(summary.path): event log up to sequence \(summary.eventSequence), schema version \(summary.schemaVersion).")
    }
}
