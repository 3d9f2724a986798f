import Foundation
import Logging
import Tracing

/// Everything `docketd` can be told. Flags beat environment variables beat these defaults (see `docketd serve --help`).
public struct Configuration: Sendable {
    /// Address to listen on (`--host`, `DOCKET_HOST`).
    public var host: String
    /// Port to listen on; 0 picks a free one (`--port`, `DOCKET_PORT`).
    public var port: Int
    /// Folder holding the database (`--data-dir`, `DOCKET_DATA_DIR`); created when missing.
    public var dataDirectory: String
    /// The database (`--database`, `DOCKET_DATABASE_URL`): nil means the SQLite file in the data folder.
    public var database: StorageLocation?
    /// Seed demo users and records when the data folder is new (`--demo`, `DOCKET_DEMO`).
    public var demo: Bool
    /// Log level (`--log-level`, `DOCKET_LOG_LEVEL`).
    public var logLevel: Logger.Level
    /// The base URL used in links (`Link` headers, reference links); nil derives it from each request's Host.
    public var publicURL: String?
    /// bcrypt cost for new password hashes.
    public var bcryptCost: UInt8
    /// How long a verified Basic credential is remembered, so requests do not each pay a bcrypt check.
    public var credentialCacheTTL: Duration
    /// Idle time after which a session cookie stops working (ServiceNow's default is 30 minutes).
    public var sessionTimeout: Duration
    /// The largest `sysparm_limit` accepted.
    public var maxPageSize: Int
    /// The largest request body accepted, in bytes.
    public var maxBodySize: Int
    /// The largest attachment accepted, in bytes (`--max-attachment-size`, `DOCKET_MAX_ATTACHMENT_SIZE`).
    public var maxAttachmentSize: Int
    /// PEM certificate chain for HTTPS (`--tls-cert`, `DOCKET_TLS_CERT`); with `tlsKeyPath`, docketd serves TLS
    /// only (HTTP/1.1 and HTTP/2 by ALPN).
    public var tlsCertificatePath: String?
    /// PEM private key for HTTPS (`--tls-key`, `DOCKET_TLS_KEY`).
    public var tlsKeyPath: String?
    /// PEM certificates of the authorities whose client certificates docketd accepts (`--tls-client-ca`,
    /// `DOCKET_TLS_CLIENT_CA`): with it, a client may present a certificate, which signs it in as the user it is
    /// registered to (`docketd users certificate`); without it, none is asked for.
    public var tlsClientCAPath: String?

    /// How long a connection may stay without a complete request head (after it opens, or after the previous
    /// answer) before it is closed (`--idle-timeout`, `DOCKET_IDLE_TIMEOUT`). Half-open connections and idle
    /// keep-alive connections both end after it; a request that is being answered is never cut.
    public var idleTimeout: Duration

    /// Threads that run bcrypt, apart from everything else (`--password-hash-threads`,
    /// `DOCKET_PASSWORD_HASH_THREADS`); nil means half the processors, at least one.
    public var passwordHashThreads: Int?
    /// Password checks allowed to run or wait at once; more are answered 503 with `Retry-After`.
    public var passwordHashQueue: Int
    /// Login throttling: free failures per user name and client address, per address, the longest wait.
    public var loginThrottle: LoginThrottlePolicy

    /// Bytes all attachments of one record may hold together (`--attachment-quota-per-record`); nil for no limit.
    public var attachmentQuotaPerRecord: Int? = 100 * 1024 * 1024
    /// Bytes all attachments one (non-admin) user uploaded may hold together (`--attachment-quota-per-user`);
    /// nil for no limit.
    public var attachmentQuotaPerUser: Int? = 1024 * 1024 * 1024

    /// Attachment uploads this instance receives at once (`--concurrent-uploads`); more are answered 503 with
    /// `Retry-After` before their body is read. With the largest attachment this bounds the memory uploads hold.
    public var concurrentUploads: Int = 8
    /// Attachment uploads one user may send at once; more are answered 429 with `Retry-After`.
    public var concurrentUploadsPerUser: Int = 2

    /// How long the event log keeps events (`--event-log-retention-days`); followers further behind must resync.
    public var eventLogRetention: Duration = .seconds(7 * 86_400)
    /// The most events the event log keeps (`--event-log-max-events`).
    public var eventLogMaxEvents: Int = 1_000_000
    /// The most changes one live stream or subscription may replay from where it resumes
    /// (`--live-replay-max-events`); one further behind is told to resync (read the current state again).
    public var liveReplayMaxEvents: Int = RecordStore.defaultReplayLimit
    /// How often live streams send a heartbeat (which keeps proxies from closing them) and check that their
    /// credentials still hold (`--live-heartbeat-seconds`).
    public var liveHeartbeat: Duration = .seconds(15)
    /// Live streams one user may hold open at once (`--live-streams-per-user`).
    public var liveStreamsPerUser: Int = 16
    /// The OpenID Connect provider's realm (`--oidc-realm`): its issuer is `{base}/realms/{realm}`.
    public var oidcRealm: String = "docket"
    /// Outside OpenID providers whose tokens are accepted (`--oidc-trust`).
    public var oidcTrust: [TrustedIssuer] = []
    /// Whether a trusted provider's user unknown here is made on first sight (`--oidc-provision`).
    public var oidcProvision = false
    /// Whether push endpoints may be `http://` or name loopback and private addresses
    /// (`--push-allow-insecure-endpoints`; closed networks and tests). Off: public HTTPS endpoints only.
    public var pushAllowInsecureEndpoints = false
    /// Whom push services may contact about docketd's messages, the VAPID `sub` (`--push-contact`): a `mailto:` or
    /// `https:` URL; nil for the public URL, else `mailto:admin@localhost`.
    public var pushContact: String?
    /// Apple's push service (`--apns-…`); nil: devices cannot register APNs tokens.
    public var apns: APNsConfiguration?
    /// How long the notifier's lease lasts without renewal when several instances share a database.
    var notifierLease: Duration = .seconds(60)
    /// How long a GraphQL WebSocket may stay open without `connection_init` (then it is closed with 4408).
    public var liveSocketInitTimeout: Duration = .seconds(10)

    /// Serve `/metrics` on a listener of its own at this port (`--metrics-port`; 0 picks a free one); nil: none.
    public var metricsPort: Int?
    /// The metrics listener's address (`--metrics-host`).
    public var metricsHost = "127.0.0.1"
    /// Serve `/metrics` on the main port too, to requests bearing `Authorization: Bearer` this token
    /// (`--metrics-token`, `DOCKET_METRICS_TOKEN`); it guards the listener of its own as well.
    public var metricsToken: String?
    /// Called with the metrics listener's port once it listens (docketd prints it).
    public var onMetricsListening: (@Sendable (Int) async -> Void)?
    /// Bytes of rendered Table API list pages kept to serve again while nothing has been written since
    /// (`--list-cache-mb`; 0 keeps none); see ``ListPages``.
    public var listCacheBytes: Int = 64 << 20
    /// Export OpenTelemetry traces over OTLP/HTTP to this URL (`--otel-endpoint`; see ``TraceExport``); nil: none.
    public var otelEndpoint: String?
    /// Tests only: where spans go, instead of an exporter to ``otelEndpoint``.
    var tracer: (any Tracer)? = nil
    /// The log handler of the application's loggers (an embedding program's, or a test's reading what was logged);
    /// nil for the process's (`LoggingSystem`).
    public var logHandler: (@Sendable (String) -> any LogHandler)? = nil

    /// An administrator to create on a start that finds no user who can log in (`DOCKET_ADMIN_USER`,
    /// `DOCKET_ADMIN_PASSWORD`); ignored once anyone can log in.
    public var initialAdmin: (userName: String, password: String)?
    /// Tests only: whether the hourly maintenance (pruning the event log, ended sessions, rate counts) runs; it
    /// writes at start, which a test planning the failure of a statement must not meet.
    var runsMaintenance = true
    /// Tests only: wraps the opened storage (to make it fail on demand).
    var wrapStorage: (@Sendable (any Storage) -> any Storage)? = nil

    /// Whether docketd serves HTTPS.
    public var usesTLS: Bool { tlsCertificatePath != nil && tlsKeyPath != nil }

    /// Whether browsers reach docketd over HTTPS: it serves TLS itself, or its public URL (a TLS proxy in front)
    /// is `https://`. Session cookies are then marked `Secure`.
    public var servedOverHTTPS: Bool {
        usesTLS || publicURL?.lowercased().hasPrefix("https://") == true
    }

    public init(
        host: String = "127.0.0.1", port: Int = 8080, dataDirectory: String = "./.docket", demo: Bool = false,
        logLevel: Logger.Level = .info, publicURL: String? = nil, bcryptCost: UInt8 = 12,
        credentialCacheTTL: Duration = .seconds(300), sessionTimeout: Duration = .seconds(1800),
        maxPageSize: Int = 10_000, maxBodySize: Int = 4 * 1024 * 1024, maxAttachmentSize: Int = 20 * 1024 * 1024,
        tlsCertificatePath: String? = nil, tlsKeyPath: String? = nil, idleTimeout: Duration = .seconds(30),
        passwordHashThreads: Int? = nil, passwordHashQueue: Int = 64, loginThrottle: LoginThrottlePolicy = .init()
    ) {
        self.passwordHashThreads = passwordHashThreads
        self.passwordHashQueue = passwordHashQueue
        self.loginThrottle = loginThrottle
        self.idleTimeout = idleTimeout
        self.host = host
        self.port = port
        self.dataDirectory = dataDirectory
        self.demo = demo
        self.logLevel = logLevel
        self.publicURL = publicURL
        self.bcryptCost = bcryptCost
        self.credentialCacheTTL = credentialCacheTTL
        self.sessionTimeout = sessionTimeout
        self.maxPageSize = maxPageSize
        self.maxBodySize = maxBodySize
        self.maxAttachmentSize = maxAttachmentSize
        self.tlsCertificatePath = tlsCertificatePath
        self.tlsKeyPath = tlsKeyPath
    }

    /// The database file inside the data folder.
    public var databasePath: String {
        URL(fileURLWithPath: dataDirectory).appendingPathComponent("docket.sqlite").path
    }

    /// Where the data lives: `database`, or the SQLite file in the data folder.
    public var storageLocation: StorageLocation { database ?? .sqlite(path: databasePath) }

    /// Makes sure an SQLite database can be created where it is to be: the data folder (checked by
    /// ``DataFolder``), or the folder of an explicit `sqlite:PATH`. PostgreSQL needs no folder.
    public func prepareStorage() throws {
        switch database {
        case nil: try DataFolder.prepare(dataDirectory)
        case .sqlite(let path)?:
            try DataFolder.prepare(URL(fileURLWithPath: path).deletingLastPathComponent().path, databaseName: URL(fileURLWithPath: path).lastPathComponent)
        case .postgres?: break
        }
    }
}
