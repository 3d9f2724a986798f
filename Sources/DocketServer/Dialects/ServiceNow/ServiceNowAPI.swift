import Hummingbird

/// The ServiceNow dialect's REST APIs: everything below `/api/` (Table, Attachment, Stats, Batch, My Work,
/// GraphQL, and Docket's own event stream, which shares their authentication and envelope).
///
/// It is a router of its own, mounted at `/api`: its middlewares (content negotiation and the error envelope,
/// authentication, rate limits) run for every request below `/api/`, including paths and methods no route
/// matches, which therefore answer 401 to a stranger and "Requested URI does not represent any resource" to a
/// caller, as an instance does. `X-HTTP-Method-Override` applies here only.
struct ServiceNowAPI {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let configuration: Configuration
    let identity: Identity
    let rateLimiter: RateLimiter
    let graphQL: NowGraphQLController
    let events: EventStreamController
    let uploads: UploadGate
    let notifications: NotificationController
    /// The Table API's rendered list pages (``ListPages``), shared by its three mounts.
    let listPages: ListPages
    /// Where a batch's sub-requests go: this router, once built.
    let batchResponder = BatchController.ResponderBox()

    func mount() -> DialectMount {
        let router = router()
        let responder = router.buildResponder()
        // A batch's sub-requests run through this router (they are all ServiceNow API calls), as its caller.
        batchResponder.set(responder)
        return DialectMount(name: "servicenow", prefix: "/api", responder: MethodOverrideResponder(inner: responder))
    }

    /// The router of every ServiceNow API path (and Docket's own under `/api/docket`).
    func router() -> Router<Context> {
        let router = Router(context: Context.self, options: .autoGenerateHeadEndpoints)
        router.add(middleware: BodyLimitMiddleware(maxBodySize: configuration.maxBodySize))
        router.add(middleware: ServiceNowMiddleware())
        router.add(middleware: AuthMiddleware(
            identity: identity, secure: configuration.servedOverHTTPS
        ))
        router.add(middleware: RateLimitMiddleware(limiter: rateLimiter))
        for (path, version) in [("/api/now/table", 2), ("/api/now/v1/table", 1), ("/api/now/v2/table", 2)] {
            router.addRoutes(
                TableController(store: store, configuration: configuration, version: version, pages: listPages).endpoints, atPath: RouterPath(path)
            )
        }
        for path in ["/api/now/attachment", "/api/now/v1/attachment"] {
            router.addRoutes(AttachmentController(store: store, configuration: configuration, uploads: uploads).endpoints, atPath: RouterPath(path))
        }
        for path in ["/api/now/stats", "/api/now/v1/stats"] {
            router.addRoutes(StatsController(store: store, configuration: configuration).endpoints, atPath: RouterPath(path))
        }
        for path in ["/api/now/batch", "/api/now/v1/batch"] {
            router.addRoutes(BatchController(responder: batchResponder).endpoints, atPath: RouterPath(path))
        }
        router.addRoutes(
            MyWorkController(store: store, configuration: configuration).endpoints, atPath: "/api/x_snc_my_work/v1/tracker"
        )
        let cmdb = CMDBController(store: store, configuration: configuration)
        router.addRoutes(cmdb.instanceEndpoints, atPath: "/api/now/cmdb/instance")
        router.addRoutes(cmdb.metaEndpoints, atPath: "/api/now/cmdb/meta")
        router.addRoutes(TinyURLController(store: store).endpoints, atPath: "/api/now/tinyurl")
        let changes = ChangeManagementController(store: store, configuration: configuration)
        router.addRoutes(changes.endpoints, atPath: "/api/sn_chg_rest")
        router.addRoutes(changes.endpoints, atPath: "/api/sn_chg_rest/v1")
        router.addRoutes(
            ServiceCatalogController(store: store, configuration: configuration).endpoints, atPath: "/api/sn_sc/servicecatalog"
        )
        router.addRoutes(graphQL.endpoints, atPath: "/api/now/graphql")
        router.addRoutes(events.endpoints, atPath: "/api/docket")
        router.addRoutes(notifications.routes, atPath: "/api/docket")
        let routes = router.routes.map { (method: $0.method.rawValue, path: $0.path.description) }
        // A route added to a described API without its description stops every debug build's tests here.
        assert(OpenAPIDocument.undescribed(routes).isEmpty, "routes without an OpenAPI description: \(OpenAPIDocument.undescribed(routes))")
        router.addRoutes(OpenAPIController(store: store, configuration: configuration, routes: routes).endpoints, atPath: "/api/docket")
        return router
    }
}
