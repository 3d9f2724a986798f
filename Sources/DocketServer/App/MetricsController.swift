import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle

/// `GET /metrics` in Prometheus's text format. Off the public API unless asked for: on a listener of its own
/// (`--metrics-port`, on `127.0.0.1` unless `--metrics-host` says otherwise), and on the main port only with
/// `--metrics-token`, to requests bearing `Authorization: Bearer TOKEN` (401 otherwise). A token also guards the
/// listener of its own when both are given.
struct MetricsController: Sendable {
    let metrics: ServerMetrics
    /// Checks the metrics token (``AppCredentials``), when one is configured.
    let identity: Identity

    func add<Context: RequestContext>(to router: Router<Context>) {
        router.get("/metrics") { request, _ in await self.answer(request) }
    }

    func answer(_ request: Request) async -> Response {
        let presented = request.headers[.authorization].flatMap { value -> String? in
            let parts = value.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
            return String(parts[1]).trimmingCharacters(in: .whitespaces)
        }
        do {
            try identity.metrics(presented)
        } catch {
            return Response(
                status: .unauthorized,
                headers: [.wwwAuthenticate: #"Bearer realm="metrics""#, .contentType: "text/plain; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: "The metrics need Authorization: Bearer with the metrics token.\n"))
            )
        }
        let text = await metrics.exposition()
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: text))
        )
    }

    /// The listener of its own (`--metrics-port`): only `/metrics`. Prints
    /// `docketd metrics listening on http://HOST:PORT` to standard output when ready (port 0 picks one).
    func listener(host: String, port: Int, logger: Logger, onRunning: @escaping @Sendable (Int) async -> Void) -> some Service {
        let router = Router()
        add(to: router)
        return Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "docketd"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
            logger: logger
        )
    }
}
