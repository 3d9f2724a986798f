import DocketModel
import Hummingbird

/// `GET /health`: unauthenticated liveness check for load balancers and scripts.
struct HealthController {
    typealias Context = DocketRequestContext

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get(use: health)
        return routes
    }

    @Sendable func health(_ request: Request, context: Context) async throws -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"status":"ok","service":"docketd"}"#))
        )
    }
}
