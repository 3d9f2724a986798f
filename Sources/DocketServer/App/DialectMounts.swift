import Hummingbird

/// One dialect's share of the server: the paths it claims and the responder that answers them — the dialect's
/// own router, with its own error middleware, authenticators and not-found answer.
///
/// A route group of one shared router is not enough for that: Hummingbird sends a request whose path or method
/// matches no route to the router's not-found responder, which runs only the router's global middlewares. A
/// dialect with a router of its own answers its unknown paths and methods itself (ServiceNow: 401 before
/// anything else, then "Requested URI does not represent any resource"; DataSync: GraphQL's error shape).
struct DialectMount: Sendable {
    typealias Context = DocketRequestContext

    /// The dialect's name in logs and metrics (`servicenow`, `eto`, `web`, …).
    let name: String
    /// The path the dialect owns, with every path below it (whole segments: `/apix` is not below `/api`).
    let prefix: String
    let responder: any HTTPResponder<Context>
    /// A test of its own instead of the prefix (ETO's `/API/*.svc` in any case, which `/api` must not take).
    var matches: (@Sendable (String) -> Bool)? = nil

    init(
        name: String, prefix: String, responder: any HTTPResponder<Context>, claims matches: (@Sendable (String) -> Bool)? = nil
    ) {
        self.name = name
        self.prefix = prefix
        self.responder = responder
        self.matches = matches
    }

    func claims(_ path: String) -> Bool {
        if let matches { return matches(path) }
        return path == prefix || (path.hasPrefix(prefix) && path.utf8.dropFirst(prefix.utf8.count).first == UInt8(ascii: "/"))
    }
}

/// The server's responder: hands each request to the first dialect that claims its path, and everything else
/// (health, the login endpoints at the root, unknown paths) to the root router.
struct DialectResponder: HTTPResponder {
    typealias Context = DocketRequestContext

    let mounts: [DialectMount]
    let root: any HTTPResponder<Context>

    func respond(to request: Request, context: Context) async throws -> Response {
        let path = request.uri.path
        for mount in mounts where mount.claims(path) {
            return try await mount.responder.respond(to: request, context: context)
        }
        return try await root.respond(to: request, context: context)
    }

    /// The name of the dialect that answers `path`: a mount's, or `root` (health, the login endpoints, unknown paths).
    func dialect(of path: String) -> String {
        mounts.first { $0.claims(path) }?.name ?? "root"
    }
}
