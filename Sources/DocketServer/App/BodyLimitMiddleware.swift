import Hummingbird

/// Applies the configured request body limit (`Configuration.maxBodySize`) to every request.
struct BodyLimitMiddleware: RouterMiddleware {
    typealias Context = DocketRequestContext

    let maxBodySize: Int

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var context = context
        context.maxBodySize = maxBodySize
        return try await next(request, context)
    }
}
