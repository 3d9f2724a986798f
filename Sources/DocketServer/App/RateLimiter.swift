import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import Synchronization

/// REST rate limits from `sys_rate_limit_rules`, as ServiceNow applies them: requests per hour, per user,
/// in fixed hourly windows. A rule for the single user beats role rules, which beat rules for all users;
/// among several candidates the lowest limit wins. Rules apply to one API (`resource`) or, when empty, all.
/// Counts are kept in memory, or in the database where several docketd share it (each request is then counted
/// once, whichever instance it reached).
final class RateLimiter: Sendable, ChangeObserver {
    struct Rule: Sendable {
        var sysID: String
        var resource: String
        var type: String
        var userID: String
        var role: String
        var limit: Int
    }

    struct Decision: Sendable {
        var rule: Rule
        var allowed: Bool
        /// Unix time at which the window resets.
        var reset: Int
        var retryAfter: Int
    }

    private struct State {
        var rules: [Rule]?
        /// Counts invalidations: rules read before the latest one are not kept.
        var generation = 0
        var window = 0
        var counts: [String: Int] = [:]
    }

    private let store: RecordStore
    private let state = Mutex(State())

    init(store: RecordStore) {
        self.store = store
    }

    /// Forgets the loaded rules (after a change to `sys_rate_limit_rules`).
    func invalidate() {
        state.withLock { state in
            state.rules = nil
            state.generation += 1
        }
    }

    /// Rules are read again after any change to `sys_rate_limit_rules`.
    func observe(_ event: ChangeEvent) {
        if event.table == "sys_rate_limit_rules" { invalidate() }
    }

    /// The API a path belongs to, as rules name it.
    static func resource(of path: String) -> String {
        let parts = path.split(separator: "/")
        guard parts.count >= 3, parts[0] == "api" else { return "" }
        if parts[1] == "x_snc_my_work" { return "my_work" }
        let rest = parts.dropFirst(2).drop { $0 == "v1" || $0 == "v2" }
        return rest.first.map(String.init) ?? ""
    }

    /// Counts a request and says whether it may go ahead; nil when no rule applies to it.
    func check(caller: Caller, resource: String, now: Date = Date()) async throws -> Decision? {
        let rules = try await loadRules()
        let candidates = rules.filter { $0.resource.isEmpty || $0.resource == resource }
        let userRules = candidates.filter { $0.type == "user" && $0.userID == caller.userID }
        let roleRules = candidates.filter { $0.type == "role" && caller.roles.contains($0.role) }
        let allRules = candidates.filter { $0.type == "all_users" }
        guard let rule = [userRules, roleRules, allRules].first(where: { !$0.isEmpty })?.min(by: { $0.limit < $1.limit })
        else { return nil }
        let seconds = Int(now.timeIntervalSince1970)
        let window = seconds - seconds % 3600
        let reset = window + 3600
        let key = rule.sysID + "|" + caller.userID
        if store.storage.isShared {
            let count = try await RateCounts(storage: store.storage).count(key, window: window, limit: rule.limit)
            return Decision(rule: rule, allowed: count < rule.limit, reset: reset, retryAfter: max(1, reset - seconds))
        }
        let count = state.withLock { state -> Int in
            if state.window != window {
                state.window = window
                state.counts.removeAll()
            }
            let current = state.counts[key, default: 0]
            if current < rule.limit { state.counts[key] = current + 1 }
            return current
        }
        return Decision(rule: rule, allowed: count < rule.limit, reset: reset, retryAfter: max(1, reset - seconds))
    }

    private func loadRules() async throws -> [Rule] {
        let (cached, generation) = state.withLock { ($0.rules, $0.generation) }
        if let cached { return cached }
        let page = try await store.list(
            RecordQuery(table: "sys_rate_limit_rules", query: try EncodedQuery("active=true"), count: false),
            caller: .system
        )
        let rules = page.records.map { record in
            Rule(
                sysID: record.sysID, resource: record["resource"], type: record["type"], userID: record["user"],
                role: record["role"], limit: max(0, Int(record["rate_limit"]) ?? 0)
            )
        }
        // A change to the rules while they were read: these may be stale, so they answer this request only.
        state.withLock { state in
            if state.generation == generation { state.rules = rules }
        }
        return rules
    }
}

/// Applies ``RateLimiter`` to every authenticated ServiceNow API request (a batch counts once).
struct RateLimitMiddleware: RouterMiddleware {
    typealias Context = DocketRequestContext

    let limiter: RateLimiter

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard !context.isSubRequest, let caller = context.caller,
            let decision = try await limiter.check(caller: caller, resource: RateLimiter.resource(of: request.uri.path))
        else { return try await next(request, context) }
        let headers: HTTPFields = [
            .xRateLimitLimit: String(decision.rule.limit), .xRateLimitReset: String(decision.reset),
            .xRateLimitRule: decision.rule.sysID,
        ]
        guard decision.allowed else {
            var error = ServiceNowError(
                .tooManyRequests, "Rate limit exceeded",
                detail: "Rate limit of \(decision.rule.limit) requests per hour for "
                    + (decision.rule.resource.isEmpty ? "REST APIs" : Self.apiName(decision.rule.resource)) + " exceeded"
            )
            error.headers = headers
            error.headers[.retryAfter] = String(decision.retryAfter)
            throw error
        }
        var response = try await next(request, context)
        response.headers.append(contentsOf: headers)
        return response
    }

    private static func apiName(_ resource: String) -> String {
        switch resource {
        case "table": return "Table API"
        case "attachment": return "Attachment API"
        case "stats": return "Aggregate API"
        case "batch": return "Batch API"
        case "my_work": return "My Work API"
        default: return resource
        }
    }
}

extension HTTPField.Name {
    static let xRateLimitLimit = Self("X-RateLimit-Limit")!
    static let xRateLimitReset = Self("X-RateLimit-Reset")!
    static let xRateLimitRule = Self("X-RateLimit-Rule")!
}
