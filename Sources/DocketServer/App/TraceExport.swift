import Foundation
import Logging
import OTel
import ServiceLifecycle
import Tracing

/// Sends docketd's spans (``Traces``) to an OpenTelemetry collector over OTLP/HTTP with protobuf (swift-otel), in
/// batches, from a service that runs beside the server and flushes what it holds when docketd stops.
///
/// The collector's address is `--otel-endpoint`. The standard `OTEL_*` variables refine the rest: headers a
/// collector asks for (`OTEL_EXPORTER_OTLP_HEADERS`, kept out of the command line), sampling
/// (`OTEL_TRACES_SAMPLER`, by default every trace, or as the caller's `traceparent` decided), batching
/// (`OTEL_BSP_SCHEDULE_DELAY`), the service's name (`OTEL_SERVICE_NAME`, by default `docketd`).
public enum TraceExport {
    /// The URL spans are posted to: `endpoint` as given when it has a path, with OTLP's `/v1/traces` when it is
    /// only a scheme, host and port (as `OTEL_EXPORTER_OTLP_ENDPOINT` is read). Throws a sentence to act on.
    public static func tracesURL(_ endpoint: String) throws -> String {
        guard let url = URLComponents(string: endpoint), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else {
            throw StartupFailure("--otel-endpoint must be an http or https URL of an OpenTelemetry collector, e.g. http://localhost:4318, not '\(endpoint)'.")
        }
        guard url.user == nil, url.password == nil else {
            throw StartupFailure("--otel-endpoint must not carry credentials; give a collector's headers in OTEL_EXPORTER_OTLP_HEADERS.")
        }
        guard url.query == nil, url.fragment == nil else {
            throw StartupFailure("--otel-endpoint takes no query or fragment: '\(endpoint)'.")
        }
        if url.path.isEmpty || url.path == "/" {
            return endpoint.hasSuffix("/") ? endpoint + "v1/traces" : endpoint + "/v1/traces"
        }
        return endpoint
    }

    /// The tracer and the service that exports what it records.
    static func backend(endpoint: String, logger: Logger) throws -> (tracer: any Tracer, service: any Service) {
        var configuration = OTel.Configuration.default
        configuration.serviceName = "docketd"
        configuration.diagnosticLogger = .custom(logger)
        configuration.diagnosticLogLevel = .warning
        configuration.propagators = [.traceContext]
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.endpoint = try tracesURL(endpoint)
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        // A collector that does not answer holds a batch (and a stop, which sends what is left) a few seconds, not
        // the specification's 10 and 30: the stop has 15 s for everything (``serveUntilSignalled``).
        configuration.traces.otlpExporter.timeout = .seconds(3)
        configuration.traces.batchSpanProcessor.exportTimeout = .seconds(5)
        do {
            let backend = try OTel.makeTracingBackend(configuration: configuration)
            return (backend.factory, Exporting(service: backend.service, logger: logger))
        } catch {
            throw StartupFailure("Traces cannot be exported to \(endpoint): \(error). (OTEL_SDK_DISABLED=true turns them off; then leave out --otel-endpoint.)")
        }
    }
}

/// The exporter's service, whose failure (a collector gone at the stop) costs spans and a warning, never the
/// server: docketd's stop stays a clean one.
private struct Exporting: Service {
    let service: any Service
    let logger: Logger

    func run() async throws {
        do {
            try await service.run()
        } catch {
            logger.warning("Trace export stopped", metadata: ["error.type": "\(String(reflecting: type(of: error)))"])
        }
    }
}
