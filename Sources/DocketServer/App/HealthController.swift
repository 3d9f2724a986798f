import DocketModel
import Hummingbird
import Synchronization

/// `GET /health`: unauthenticated check for load balancers and scripts. 200 `{"status":"ok"}` while the database
/// answers; 503 `{"status":"unavailable","storage":"…"}` with `Retry-After` when it does not (within
/// ``timeout``), so that a load balancer sends people to an instance that can serve them.
struct HealthController {
    typealias Context = DocketRequestContext

    let storage: any Storage
    static let timeout = Duration.seconds(2)
    /// A check is reused for this long: load balancers poll often, and the answer stays cheap.
    static let reuse = Duration.seconds(1)
    private let last = LastCheck()

    private final class LastCheck: Sendable {
        let value = Mutex<(at: ContinuousClock.Instant, failure: StorageUnavailable?)?>(nil)
    }

    init(storage: any Storage) { self.storage = storage }

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get(use: health)
        return routes
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
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await storage.read { db in try await db.integer("SELECT 1") } }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    throw StorageUnavailable(reason: "no answer within \(timeout)")
                }
                defer { group.cancelAll() }
                try await group.next()
            }
            return nil
        } catch {
            return StorageUnavailable.classify(error) ?? StorageUnavailable(reason: "\(error)")
        }
    }
}
