import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle

/// Builds the docketd application: opens (or creates) the database in the data folder, seeds demo data
/// when asked and the folder is new, and wires every route. `docketd` and the tests build the very same app.
public func buildApplication(
    _ configuration: Configuration, onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    // TLS files are checked before anything touches the data folder.
    let tls = try configuration.tlsCertificatePath.flatMap { certificate in
        try configuration.tlsKeyPath.map {
            try TLSSetup.serverConfiguration(certificatePath: certificate, keyPath: $0, clientCAPath: configuration.tlsClientCAPath)
        }
    }
    let idle = TimeAmount.nanoseconds(
        Int64(clamping: configuration.idleTimeout.components.seconds) * 1_000_000_000
            + configuration.idleTimeout.components.attoseconds / 1_000_000_000
    )
    // The idle timeout also bounds how long a connection may take to send a complete request head.
    let http1 = HTTP1Channel.Configuration(
        additionalChannelHandlers: [ConnectMethodHandler(), HeadLimitHandler(), LingeringCloseHandler()], idleTimeout: idle
    )
    var logger = configuration.logHandler.map { Logger(label: "docketd", factory: $0) } ?? Logger(label: "docketd")
    logger.logLevel = configuration.logLevel
    // Traces: a test's tracer, or one exporting to --otel-endpoint (checked before the data folder is touched).
    let traceExport = try configuration.otelEndpoint.map { try TraceExport.backend(endpoint: $0, logger: logger) }
    let tracer = configuration.tracer ?? traceExport?.tracer
    try configuration.prepareStorage()
    let location = try await configuration.storageLocation.open(logger: logger)
    let metrics = ServerMetrics()
    let storage = MeasuredStorage(base: configuration.wrapStorage?(location) ?? location, metrics: metrics)
    let hasher = PasswordHasher(
        cost: configuration.bcryptCost, threads: configuration.passwordHashThreads,
        queueLimit: configuration.passwordHashQueue
    )
    let store: RecordStore
    do {
        let (opened, isNew) = try await RecordStore.open(
            storage: storage, logger: logger, replayLimit: configuration.liveReplayMaxEvents, lockWait: SchemaStore.startLockWait,
            hashPassword: hasher.hash
        )
        store = opened
        if isNew, configuration.demo {
            try await DemoData.seed(store)
            logger.info("Seeded demo data", metadata: ["dataDirectory": "\(configuration.dataDirectory)"])
        } else if configuration.demo, try await !DemoData.isPresent(in: store) {
            logger.warning(
                "--demo was given, but the data folder already holds a database without the demo data; it is served as it is. Point --data-dir at an empty folder for the demo.",
                metadata: ["dataDirectory": "\(configuration.dataDirectory)"]
            )
        }
        try await OAuthDirectory.offerCommandLineClient(in: store)
        if let admin = configuration.initialAdmin, try await UserDirectory(store: store).activeUserCount() == 0 {
            try await UserAdministration.createUser(in: store, userName: admin.userName, password: admin.password, roles: ["admin"])
            logger.notice("Created the first administrator from DOCKET_ADMIN_USER", metadata: ["user": "\(admin.userName)"])
        }
        if try await UserDirectory(store: store).activeUserCount() == 0 {
            logger.warning(
                "No users exist yet, so nobody can log in. Create the first administrator with `docketd users create --admin <user name> --data-dir <folder>`, or start once with DOCKET_ADMIN_USER and DOCKET_ADMIN_PASSWORD set.",
                metadata: ["dataDirectory": "\(configuration.dataDirectory)"]
            )
        }
    } catch {
        // Nothing is left open when the database cannot be prepared.
        await hasher.shutdown()
        try? await storage.close()
        throw error
    }
    // On PostgreSQL several docketd may serve one site: failed logins are counted in the database, for all of them.
    let sharedFailures = storage.dialect == .postgres ? SharedLoginFailures(storage: storage) : nil
    let authenticator = Authenticator(
        users: UserDirectory(store: store), hasher: hasher,
        throttle: LoginThrottle(policy: configuration.loginThrottle, shared: sharedFailures, metrics: metrics),
        credentialTTL: configuration.credentialCacheTTL,
        sessionTimeout: configuration.sessionTimeout
    )
    let oauth = OAuthService(directory: OAuthDirectory(store: store), authenticator: authenticator, hasher: hasher)
    let rateLimiter = RateLimiter(store: store)
    // Caches forget what a committed change touched: told by the event log's broadcaster before anyone follows.
    let listPages = ListPages(maxBytes: configuration.listCacheBytes, metrics: metrics)
    for observer: any ChangeObserver in [authenticator, oauth, rateLimiter] { store.broadcaster.add(observer: observer) }

    // Notifications: rules judged on every committed change, messages written, pushes sent (``Notifier``).
    let notificationRules = NotificationRules(store: store)
    store.broadcaster.add(observer: notificationRules)
    let pushHTTP = PushHTTPClient()
    let apnsChannel = try configuration.apns.map { try APNsChannel(configuration: $0) }
    let publicHTTPS = configuration.publicURL.flatMap { $0.lowercased().hasPrefix("https://") ? $0 : nil }
    let vapid = try await VAPIDKey.load(storage: storage, subject: configuration.pushContact ?? publicHTTPS ?? "mailto:admin@localhost")
    let pushEndpoints = EndpointGuard(allowInsecure: configuration.pushAllowInsecureEndpoints)
    let webPush = WebPushChannel(http: pushHTTP, vapid: vapid, endpoints: pushEndpoints)
    var channels: [String: any PushChannel] = ["webpush": webPush, "unifiedpush": webPush]
    if let apnsChannel { channels["apns"] = apnsChannel }
    let dispatcher = PushDispatcher(store: store, channels: channels, logger: logger, metrics: metrics)
    let pushSubscriptions = PushSubscriptions(
        store: store, endpoints: pushEndpoints, unifiedPushProbe: { url in await UnifiedPush.isEndpoint(url, http: pushHTTP) },
        acceptsAPNs: apnsChannel != nil
    )

    let nowGraphQL = NowGraphQLController(store: store, configuration: configuration)
    // Live streams: SSE and GraphQL subscriptions over WebSocket share one per-user bound.
    let signingKey = try await SigningKey.load(storage)
    let tokenKeys = try await TokenKeys.load(storage: storage, secret: signingKey)
    let compassTokens = CompassTokens(keys: tokenKeys, sessions: SessionStore(storage: storage))
    // The OpenID provider: its access tokens are bearer tokens in every dialect.
    let openID = OpenIDProvider(
        realm: configuration.oidcRealm, storage: storage, keys: tokenKeys, directory: OAuthDirectory(store: store), oauth: oauth,
        authenticator: authenticator, publicURL: configuration.publicURL
    )
    store.broadcaster.add(observer: openID)
    // The one way in: every dialect turns credentials into a caller through it.
    let federation = configuration.oidcTrust.isEmpty
        ? nil : Federation(issuers: TrustedIssuers(configuration.oidcTrust), store: store, provision: configuration.oidcProvision)
    let identity = Identity(
        authenticator: authenticator, oauth: oauth, compass: compassTokens, openID: openID, federation: federation,
        contexts: ContextSessions(storage: storage), apps: AppCredentials(store: store, hasher: hasher, metricsToken: configuration.metricsToken),
        apiKeys: APIKeys(storage: storage),
        certificates: configuration.tlsClientCAPath == nil || !configuration.usesTLS ? nil : ClientCertificates(storage: storage)
    )
    let credentials = CredentialCheck(identity: identity)
    let liveStreams = LiveStreamLimit(perUser: configuration.liveStreamsPerUser)
    // Subscriptions and event streams that follow the head of the log alike ride one follower (``LiveGroups``).
    let liveGroups = LiveGroups(store: store, credentials: credentials, logger: logger, metrics: metrics, tracer: tracer)
    // Attachment uploads (the Attachment API's and the web UI's) share one bound.
    let uploads = UploadGate(total: configuration.concurrentUploads, perUser: configuration.concurrentUploadsPerUser)
    let dataSync = try DataSyncController(store: store, configuration: configuration)
    let webUI = try await WebUI.load()
    if let webUI {
        logger.debug("Web UI files", metadata: ["folder": "\(webUI.directory.path)"])
    } else {
        logger.warning("The web UI's files (WebResources) were not found next to docketd; / answers 503 until they are there or DOCKET_WEB_RESOURCES names them")
    }
    // Each dialect is a router of its own, with its own middlewares and not-found answer (``DialectMount``).
    let mounts = [
        // ETO first: its `/API/*.svc` paths match in any case, `/api/…` included.
        ETOAPI(store: store, identity: identity, sessions: ContextSessions(storage: storage)).mount(),
        ServiceNowAPI(
            store: store, configuration: configuration, identity: identity, rateLimiter: rateLimiter, graphQL: nowGraphQL,
            events: EventStreamController(store: store, credentials: credentials, streams: liveStreams, groups: liveGroups), uploads: uploads,
            notifications: NotificationController(store: store, vapid: vapid, subscriptions: pushSubscriptions),
            listPages: listPages
        ).mount(),
        // DataSync: GraphQL's error shape, bearer or Basic credentials, no session cookie; outside /api/.
        DataSyncController.mount(dataSync, configuration: configuration, identity: identity),
        // The web UI: `/` and `/app/…`, HTML pages, its own session cookie and CSRF tokens.
        WebAPI(
            store: store, configuration: configuration, identity: identity,
            sessions: WebSessions(secret: signingKey, secure: configuration.servedOverHTTPS), ui: webUI,
            events: EventStreamController(store: store, credentials: credentials, streams: liveStreams, groups: liveGroups), uploads: uploads,
            openID: openID, federation: federation, push: (vapid, pushSubscriptions)
        ).mount(),
        // The OpenID Connect provider, in Keycloak's layout: `/realms/{realm}` and `/auth/realms/{realm}`.
        OpenIDRoutes(provider: openID, identity: identity, configuration: configuration, pushPublicKey: vapid.publicKey).mount(),
        // AeroGear UnifiedPush's device registry and sender API (`/rest/…`), for apps built on its push SDKs.
        UPSAPI(store: store, subscriptions: pushSubscriptions, identity: identity).mount(),
        // Compass: `{status, message}` errors, its own JWT logins bound to a repository and database.
        CompassAPI(
            store: store, configuration: configuration, identity: identity, tokens: compassTokens
        ).mount(),
    ]
    // The root: health, and ServiceNow's login endpoints at the top of an instance (OAuth answers its own errors).
    // HEAD works wherever GET does (same status and headers, no body).
    let root = Router(context: DocketRequestContext.self, options: .autoGenerateHeadEndpoints)
    root.add(middleware: MalformedRequestMiddleware())
    root.add(middleware: BodyLimitMiddleware(maxBodySize: configuration.maxBodySize))
    root.addRoutes(HealthController(store: store).endpoints, atPath: "/health")
    OAuthController(identity: identity).add(to: root)
    LogoutController(authenticator: authenticator).add(to: root)
    let metricsEndpoint = MetricsController(metrics: metrics, identity: identity)
    if configuration.metricsToken != nil { metricsEndpoint.add(to: root) }
    metrics.declareStartingMetrics()
    metrics.sample { metrics in
        metrics.set(ServerMetrics.Name.liveStreams, liveStreams.open)
        metrics.set(ServerMetrics.Name.liveFollowers, store.broadcaster.count)
        metrics.set(ServerMetrics.Name.hashQueue, hasher.queued)
        // The event log's head as this process has published it; on a shared database, how far the others are ahead.
        do {
            let head = try await store.latestSequence()
            let published = store.shared.publishedUpTo ?? head
            metrics.set(ServerMetrics.Name.eventHead, published)
            metrics.set(ServerMetrics.Name.eventLag, max(0, head - published))
            for (kind, lag) in store.broadcaster.lags(head: published) {
                metrics.set(ServerMetrics.Name.followerLag, labels: [("follower", kind.rawValue)], lag)
            }
        } catch {
            // The storage metrics count the failure; the gauges keep their last reading.
        }
    }
    // On a database other docketd write too, each request first takes in what they committed.
    let dialects = DialectResponder(mounts: mounts, root: root.buildResponder())
    let responder = ObservedResponder(
        next: SharedChangesResponder(store: store, next: dialects), dialect: { dialects.dialect(of: $0) }, metrics: metrics,
        tracer: tracer
    )

    // GraphQL over WebSocket on both GraphQL endpoints: upgrades are decided by a router of their own.
    let sockets = GraphQLSocketServer(
        store: store, credentials: credentials, streams: liveStreams, groups: liveGroups, heartbeat: configuration.liveHeartbeat,
        initTimeout: configuration.liveSocketInitTimeout
    )
    let socketRouter = Router(context: DocketSocketContext.self)
    let socketDialects: [(String, any GraphQLSocketDialect)] = [
        (
            "/api/now/graphql",
            NowGraphQLSocketDialect(
                controller: nowGraphQL,
                logins: SocketLogins(identity: identity, acceptsSessionCookie: true)
            )
        ),
        (
            "/graphql",
            DataSyncSocketDialect(
                controller: dataSync, logins: SocketLogins(identity: identity, acceptsSessionCookie: false)
            )
        ),
    ]
    for (path, dialect) in socketDialects {
        socketRouter.ws(RouterPath(path), shouldUpgrade: { request, _ in sockets.shouldUpgrade(request) }) { inbound, outbound, context in
            try await sockets.run(dialect: dialect, inbound: inbound, outbound: outbound, context: context)
        }
    }
    let server = try ServerChannels.builder(
        webSocketRouter: socketRouter, http1: http1,
        // Keep-alive pings come from the sockets' shared clock (``SocketClock``), not from a task per socket.
        webSocket: WebSocketServerConfiguration(maxFrameSize: GraphQLSocketServer.maxMessageSize, autoPing: .disabled),
        idleTimeout: configuration.idleTimeout, tls: tls,
        maxBodySize: max(configuration.maxBodySize, configuration.maxAttachmentSize)
    )

    return Application(
        responder: responder,
        server: server,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "docketd"),
        services: [
            StorageService(storage: storage, hasher: hasher),
            pushHTTP,
        ] + (apnsChannel.map { [$0.http] } ?? []) + [
            NotifierService(notifier: Notifier(
                store: store, rules: notificationRules, dispatcher: dispatcher, leaseDuration: configuration.notifierLease,
                callers: { userID in
                    do { return try await authenticator.caller(userID: userID) } catch { throw StorageUnavailable(reason: "users cannot be read") }
                },
                logger: logger
            )),
            LiveTickService(broadcaster: store.broadcaster, interval: configuration.liveHeartbeat),
        ] + (traceExport.map { [$0.service] } ?? []) + (configuration.metricsPort.map { port in
            [metricsEndpoint.listener(
                host: configuration.metricsHost, port: port, logger: logger,
                onRunning: { port in await configuration.onMetricsListening?(port) }
            ) as any Service]
        } ?? []) + (configuration.runsMaintenance ? [EventLogRetentionService(
                store: store, retention: configuration.eventLogRetention, maximumEvents: configuration.eventLogMaxEvents,
                loginMemory: configuration.loginThrottle.memory, logger: logger
            )] : []) + (storage.logSignals(ignoring: { store.shared.accountedFor($0) }).map { [SharedChangesService(store: store, signals: $0, logger: logger)] } ?? []),
        onServerRunning: onServerRunning,
        logger: logger
    )
}

/// Closes the database and stops the password-hashing threads when the application shuts down.
struct StorageService: Service {
    let storage: any Storage
    let hasher: PasswordHasher

    func run() async throws {
        try? await gracefulShutdown()
        await hasher.shutdown()
        try await storage.close()
    }
}

/// Applies the event log's retention, and removes ended sessions, at start and then every hour, until the
/// application shuts down.
struct EventLogRetentionService: Service {
    let store: RecordStore
    let retention: Duration
    let maximumEvents: Int
    /// How long failed logins are remembered (the login throttle's memory).
    var loginMemory: Duration = LoginThrottlePolicy().memory
    let logger: Logger

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    let removed = try await store.pruneEventLog(
                        olderThan: Date().addingTimeInterval(-Double(retention.components.seconds)), keepingAtMost: maximumEvents
                    )
                    if removed > 0 { logger.info("Pruned the event log", metadata: ["events": "\(removed)"]) }
                } catch is CancellationError {
                    return  // Stopping: nothing went wrong.
                } catch {
                    logger.warning("Could not prune the event log", metadata: ["error": "\(error)"])
                }
                do {
                    let hour = Int(Date().timeIntervalSince1970) / 3600 * 3600
                    try await RateCounts(storage: store.storage).prune(before: hour)
                    try await SessionStore(storage: store.storage).prune()
                    try await EditSessions(storage: store.storage).prune()
                    try await ContextSessions(storage: store.storage).prune()
                    try await OpenIDGrants.prune(now: SessionStore.now(), storage: store.storage)
                    let memory = Int(loginMemory.components.seconds * 1000)
                    try await SharedLoginFailures(storage: store.storage).prune(forgetBefore: SharedLoginFailures.now() - memory)
                    try await IdempotencyRecords.prune(storage: store.storage)
                } catch is CancellationError {
                    return
                } catch {
                    logger.warning("Could not remove ended sessions, edits, rate counts and login failures", metadata: ["error": "\(error)"])
                }
                try await Task.sleep(for: .seconds(3600))
            }
        }
    }
}

/// The one clock of live streams: ticks every follower of the event log at the heartbeat interval, so that
/// idle streams send heartbeats and check their credentials without a timer each. At shutdown it ends every
/// live stream (their clients reconnect and resume), so that open streams do not hold the shutdown.
struct LiveTickService: Service {
    let broadcaster: EventBroadcaster
    let interval: Duration

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: max(.milliseconds(10), interval))
                broadcaster.tick()
            }
        }
        broadcaster.close()
    }
}
