import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Synchronization
import Tracing

/// What the layers inside a request learn that the outermost one reports: who the caller turned out to be.
/// Request contexts are values, copied into each router; this box is shared by every copy of one request's.
final class RequestNotes: Sendable {
    private let user = Mutex<String?>(nil)

    var userName: String? {
        get { user.withLock { $0 } }
        set { user.withLock { $0 = newValue } }
    }
}

/// Request ids: the caller's `X-Request-ID` when it is a sensible one (a proxy in front chose it), a new one
/// otherwise. Every log line of the request carries it (as `request_id`), and the response echoes it.
enum RequestIDs {
    static let header = HTTPField.Name("X-Request-ID")!
    /// The metadata key Hummingbird gives its request id; docketd keeps the key so that `context.id` is the same.
    static let metadataKey = "hb.request.id"

    /// The caller's id when it is 1 to 128 letters, digits and `-._:@/+=`: nothing that could forge a log line
    /// or a header.
    static func accepted(_ value: String?) -> String? {
        guard let value, (1...128).contains(value.utf8.count) else { return nil }
        let allowed = value.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return "-._:@/+=".utf8.contains(byte)
            }
        }
        return allowed ? value : nil
    }

    /// 16 hexadecimal digits: 8 chosen at random when the process starts (so that instances differ), then a
    /// count of the requests it answered (so that ids are unique within it, without asking the kernel for random
    /// bytes on every request).
    static func make() -> String {
        let number = counter.add(1, ordering: .relaxed).newValue
        return processPrefix + hex(UInt32(truncatingIfNeeded: number))
    }

    private static let processPrefix = hex(UInt32.random(in: .min ... .max))
    private static let counter = Atomic<UInt64>(0)

    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }
}

/// The outermost responder: gives each request its id and a logger that carries it, and when the answer is
/// ready records it: one log line (method, path, route pattern, dialect, user, status, duration), the request
/// metrics, and `X-Request-ID` on the response. A streamed answer (an event stream) is counted when its head is
/// ready; its duration is the time to that head.
///
/// With a tracer, each request is also a server span (a child of the caller's `traceparent` when it sends one), named
/// by its method and route pattern, that ends with the answer's head; the layers below add child spans (``Traces``),
/// and every log line of the request names its trace (`trace_id`).
struct ObservedResponder: HTTPResponder {
    typealias Context = DocketRequestContext

    let next: any HTTPResponder<Context>
    /// The dialect that answers a path (``DialectResponder/dialect(of:)``).
    let dialect: @Sendable (String) -> String
    let metrics: ServerMetrics
    /// Where spans go; nil when docketd does not trace.
    var tracer: (any Tracer)? = nil

    func respond(to request: Request, context: Context) async throws -> Response {
        guard let tracer else { return try await answer(request, context: context, span: nil) }
        var parent = ServiceContext.topLevel
        tracer.extract(request.headers, into: &parent, using: HTTPFieldsExtractor())
        let span = tracer.startSpan("HTTP", context: parent, ofKind: .server)
        var context = context
        if let traceID = Traces.traceID(of: span, tracer: tracer) { context.logger[metadataKey: "trace_id"] = .string(traceID) }
        do {
            return try await Traces.$tracer.withValue(tracer) {
                try await ServiceContext.$current.withValue(span.context) {
                    try await answer(request, context: context, span: span)
                }
            }
        } catch {
            // Only when not even an error response could be made; the span ends with it.
            Traces.failed(span, error)
            span.end()
            throw error
        }
    }

    private func answer(_ request: Request, context: Context, span: (any Span)?) async throws -> Response {
        var context = context
        let id = RequestIDs.accepted(request.headers[RequestIDs.header]) ?? RequestIDs.make()
        context.logger[metadataKey: RequestIDs.metadataKey] = .string(id)
        let start = ContinuousClock.now
        var response: Response
        do {
            response = try await next.respond(to: request, context: context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        } catch {
            // What Hummingbird itself answers for an error no layer turned into a response.
            context.logger.error("Request failed", metadata: ["error": "\(String(reflecting: type(of: error)))"])
            response = Response(status: .internalServerError)
        }
        response.headers[RequestIDs.header] = id
        let elapsed = ContinuousClock.now - start
        let dialect = dialect(request.uri.path)
        let route = context.endpointPath ?? "unmatched"
        metrics.request(
            dialect: dialect, route: route, method: Self.methodLabel(request.method), status: response.status.code, duration: elapsed
        )
        if context.logger.logLevel <= .info {
            var fields: [(key: String, value: String)] = [
                ("method", request.method.rawValue), ("path", Self.loggedPath(request.uri.path, route: route)), ("route", route),
                ("dialect", dialect), ("status", String(response.status.code)), ("duration_ms", Self.milliseconds(elapsed)),
            ]
            if let user = context.notes.userName { fields.append(("user", user)) }
            if let handler = context.logger.handler as? any RequestLineLogging, handler.logRequest(fields, source: "DocketServer") {
                // Written as it is.
            } else {
                context.logger.info("request", metadata: Logger.Metadata(uniqueKeysWithValues: fields.map { ($0.key, .string($0.value)) }))
            }
        }
        if let span {
            let method = Self.methodLabel(request.method) == "other" ? "HTTP" : request.method.rawValue
            span.operationName = context.endpointPath.map { "\(method) \($0)" } ?? method
            span.updateAttributes { attributes in
                // OpenTelemetry's name for a method outside the standard ones.
                let method = Self.methodLabel(request.method)
                attributes["http.request.method"] = method == "other" ? "_OTHER" : method
                attributes["url.path"] = Self.loggedPath(request.uri.path, route: route)
                if context.endpointPath != nil { attributes["http.route"] = route }
                attributes["http.response.status_code"] = Int64(response.status.code)
                attributes["docket.dialect"] = dialect
                attributes["docket.request_id"] = id
                if let user = context.notes.userName { attributes["enduser.id"] = user }
            }
            if response.status.code >= 500 { span.setStatus(SpanStatus(code: .error)) }
            span.end()
        }
        return response
    }

    /// A method as a metric's label: the standard ones by name, any other as `other` (a method is any token a
    /// client likes, and each label value is a series kept for the life of the process).
    static func methodLabel(_ method: HTTPRequest.Method) -> String {
        switch method {
        case .get, .head, .post, .put, .patch, .delete, .options, .connect, .trace: return method.rawValue
        default: return "other"
        }
    }

    /// The path as logged: never the query (it may hold a code or token), and the route's pattern instead of a path
    /// that carries a token (`/rest/registry/device/{token}`, a device's push token).
    static func loggedPath(_ path: String, route: String) -> String {
        carriesToken(route) ? route : path
    }

    private static let tokenSuffix = Array("token}".utf8)

    /// Whether a route pattern has a parameter whose name ends in `token` (any ASCII case): `…{token}`,
    /// `…{deviceToken}`. On the pattern's bytes (Foundation's `contains` on a lowered copy cost a request about 2 µs).
    static func carriesToken(_ route: String) -> Bool {
        let suffix = tokenSuffix
        let bytes = Array(route.utf8)
        guard bytes.count >= suffix.count else { return false }
        for end in suffix.count...bytes.count where bytes[end - 1] == UInt8(ascii: "}") {
            let start = end - suffix.count
            // ASCII letters lowered by setting 0x20; `}` is compared as it is.
            if (0..<suffix.count - 1).allSatisfy({ bytes[start + $0] | 0x20 == suffix[$0] }) { return true }
        }
        return false
    }

    /// A duration in milliseconds with three decimals.
    static func milliseconds(_ duration: Duration) -> String {
        let micros = duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
        let whole = micros / 1000, fraction = micros % 1000
        let digits = String(fraction)
        return "\(whole).\(String(repeating: "0", count: 3 - digits.count))\(digits)"
    }
}
