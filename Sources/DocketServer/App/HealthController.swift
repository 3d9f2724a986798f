import DocketModel
import Hummingbird
import OrderedCollections
import Synchronization

/// Unauthenticated checks for load balancers, orchestrators and scripts:
/// - `GET /health`: 200 `{"status":"ok"}` while the database answers; 503 `{"status":"unavailable","storage":"…"}`
///   with `Retry-After` when it does not (within ``timeout``), so that a load balancer sends people to an instance
///   that can serve them.
/// - `GET /health/live`: 200 whenever the process answers at all (a liveness probe: restart it when this fails).
/// - `GET /health/ready`: 200 when the database answers, holds the schema this docketd knows (another, newer docketd
///   may have migrated it since this one started), and this process has taken in every change other instances
///   committed; 503 naming the check that failed otherwise (a readiness probe: send no traffic meanwhile).
struct HealthController {
    typealias Context = DocketRequestContext

    let storage: any Storage
    let store: RecordStore
    static let timeout = Duration.seconds(2)
    /// A check is reused for this long: load balancers poll often, and the answer stays cheap.
    static let reuse = Duration.seconds(1)
    private let last = LastCheck()
    private let lastReady = LastReadiness()

    private final class LastReadiness: Sendable {
        let value = Mutex<(at: ContinuousClock.Instant, failed: Bool, body: OrderedDictionary<String, JSONValue>)?>(nil)
    }

    private final class LastCheck: Sendable {
        let value = Mutex<(at: ContinuousClock.Instant, failure: StorageUnavailable?)?>(nil)
    }

    init(store: RecordStore) {
        self.store = store
        self.storage = store.storage
    }

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get(use: health)
        routes.get("live") { _, _ in Self.answer(.ok, ["status": .string("ok"), "service": .string("docketd")]) }
        routes.get("ready", use: ready)
        return routes
    }

    @Sendable func ready(_ request: Request, context: Context) async throws -> Response {
        // Reused for ``reuse``, as /health is: an unauthenticated probe stays cheap however often it comes.
        if let recent = lastReady.value.withLock({ $0 }), ContinuousClock.now - recent.at < Self.reuse {
            return Self.answer(recent.failed ? .serviceUnavailable : .ok, recent.body)
        }
        var checks: OrderedDictionary<String, JSONValue> = [:]
        var failed = false
        if let failure = await Self.storageFailure(storage) {
            checks["storage"] = .string(failure.reason)
            failed = true
        } else {
            checks["storage"] = .string("ok")
            do {
                let problem = try await Self.schemaProblem(storage)
                checks["schema"] = .string(problem ?? "ok")
                failed = failed || problem != nil
                try await Self.within(Self.timeout) { try await store.catchUp() }
                checks["events"] = .string("ok")
            } catch {
                let reason = (StorageUnavailable.classify(error) ?? StorageUnavailable(reason: "\(error)")).reason
                if checks["schema"] == nil { checks["schema"] = .string(reason) } else { checks["events"] = .string(reason) }
                failed = true
            }
        }
        if failed {
            context.logger.warning("Readiness check failed", metadata: ["checks": "\(String(decoding: JSONValue.object(checks).serialized(), as: UTF8.self))"])
        }
        var body = checks
        body["status"] = .string(failed ? "unavailable" : "ok")
        body["service"] = .string("docketd")
        lastReady.value.withLock { $0 = (.now, failed, body) }
        return Self.answer(failed ? .serviceUnavailable : .ok, body)
    }

    /// Why the database's schema is not the one this docketd serves, or nil when it is.
    static func schemaProblem(_ storage: any Storage) async throws -> String? {
        switch try await storage.read({ db in try await SchemaStore.standing(db) }) {
        case .current: return nil
        case .newer(let what): return "the database was migrated by a newer docketd (it has \(what))"
        case .older(let version): return "the database has schema version \(version), not yet migrated"
        }
    }

    private static func answer(_ status: HTTPResponse.Status, _ body: OrderedDictionary<String, JSONValue>) -> Response {
        var headers: HTTPFields = [.contentType: "application/json", .cacheControl: "no-store"]
        if status == .serviceUnavailable { headers[.retryAfter] = StorageUnavailable.retryAfter }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: JSONValue.object(body).serialized())))
    }

    /// Runs `body`, or throws ``StorageUnavailable`` when it has not finished within `limit`.
    private static func within(_ limit: Duration, _ body: @escaping @Sendable () async throws -> Void) async throws {
        guard try await bounded(limit, body) != nil else { throw StorageUnavailable(reason: "no answer within \(limit)") }
    }

    @Sendable func health(_ request: Request, context: Context) async throws -> Response {
        let failure: StorageUnavailable?
        if let recent = last.value.withLock({ $0 }), ContinuousClock.now - recent.at < Self.reuse {
            failure = recent.failure
        } else {
            failure = await Self.storageFailure(storage)
            last.value.withLock { $0 = (.now, failure) }
        }
        if let failure {
            context.logger.warning("Health check: the database is unavailable", metadata: ["error": "\(failure)"])
            let body = JSONValue.object([
                "status": .string("unavailable"), "service": .string("docketd"), "storage": .string(failure.reason),
            ])
            return Response(
                status: .serviceUnavailable,
                headers: [.contentType: "application/json", .cacheControl: "no-store", .retryAfter: StorageUnavailable.retryAfter],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: body.serialized()))
            )
        }
        return Response(
            status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"status":"ok","service":"docketd","storage":"ok"}"#))
        )
    }

    /// Why the database cannot be used, or nil when one statement on it succeeds within ``timeout``.
    static func storageFailure(_ storage: any Storage) async -> StorageUnavailable? {
        do {
            try await within(timeout) { _ = try await storage.read { db in try await db.integer("SELECT 1") } }
            return nil
        } catch {
            return StorageUnavailable.classify(error) ?? StorageUnavailable(reason: "\(error)")
        }
    }
}
