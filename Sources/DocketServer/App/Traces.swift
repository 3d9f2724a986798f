import HTTPTypes
import Tracing

/// OpenTelemetry traces, when docketd is given a tracer (`--otel-endpoint`, or a test's).
///
/// ``ObservedResponder`` opens a server span for each request, a child of the caller's `traceparent` when it sends
/// one, and sets this task-local tracer for the request's work. Layers below open child spans through ``span(_:kind:_:)``
/// and ``start(_:kind:context:)`` without a tracer being threaded through them: the storage (``MeasuredStorage``), access
/// evaluation (``RecordStore/checkAccess(_:on:sysID:fields:caller:db:)``) and the live groups' fan-out. When nothing
/// traces, each costs one task-local read.
enum Traces {
    /// The tracer of the request being answered; nil when docketd does not trace.
    @TaskLocal static var tracer: (any Tracer)?

    /// A span started now, a child of the current one, when tracing; the caller ends it.
    static func start(_ name: String, kind: SpanKind = .internal, context: ServiceContext? = nil) -> (any Span)? {
        guard let tracer else { return nil }
        return tracer.startSpan(name, context: context ?? ServiceContext.current ?? .topLevel, ofKind: kind)
    }

    /// Runs `body` in a span named `name`, a child of `context` (by default the current span's) and the parent of those
    /// `body` opens. A thrown error marks the span failed, unless it is the engine's answer (``isAnswer(_:)``).
    static func span<T>(
        _ name: String, kind: SpanKind = .internal, context: ServiceContext? = nil, _ body: ((any Span)?) async throws -> T
    ) async throws -> T {
        guard let span = start(name, kind: kind, context: context) else { return try await body(nil) }
        defer { span.end() }
        do {
            return try await ServiceContext.$current.withValue(span.context) { try await body(span) }
        } catch {
            if !isAnswer(error) { failed(span, error) }
            throw error
        }
    }

    /// Whether an error is the engine's answer to the request (a 4xx: not found, forbidden, a bad value), which
    /// ends a span without failing it.
    static func isAnswer(_ error: any Error) -> Bool {
        error is EngineError || error is CancellationError
    }

    /// Marks a span failed with `error`: its type only, as the logs do (an error's text may quote what a client sent).
    static func failed(_ span: any Span, _ error: any Error) {
        span.attributes["error.type"] = String(reflecting: type(of: error))
        span.setStatus(SpanStatus(code: .error))
    }
}

/// Writes a span's context as header fields would carry it (`traceparent`), to name its trace in the request's log line.
struct DictionaryInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
}

extension Traces {
    /// The W3C trace id of `span` (as a collector shows it), when the tracer propagates W3C trace context.
    static func traceID(of span: any Span, tracer: any Tracer) -> String? {
        var fields: [String: String] = [:]
        tracer.inject(span.context, into: &fields, using: DictionaryInjector())
        // version-traceid-parentid-flags
        let parts = fields["traceparent"]?.split(separator: "-") ?? []
        return parts.count == 4 && parts[1].count == 32 ? String(parts[1]) : nil
    }
}

/// Reads a request's trace context (`traceparent`, `tracestate`, and whatever else the tracer's propagators use)
/// from its header fields.
struct HTTPFieldsExtractor: Extractor {
    func extract(key: String, from fields: HTTPFields) -> String? {
        HTTPField.Name(key).flatMap { fields[$0] }
    }
}
