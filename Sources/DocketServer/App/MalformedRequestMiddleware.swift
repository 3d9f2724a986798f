import Hummingbird
import NIOCore
import NIOHTTP1

/// Answers requests whose body turned out to be malformed HTTP (a bad chunk size, a truncated chunk) with 400,
/// and bodies over the limit with 413, on every route. Reading a body is where these surface, long after the
/// head was routed; unmapped they would be 500s. Dialects below `/api` word the same errors in their own
/// envelope first; this covers the rest (`/oauth_token.do`, `/health`).
struct MalformedRequestMiddleware: RouterMiddleware {
    typealias Context = DocketRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPParserError {
            context.logger.debug("Malformed request", metadata: ["error": "\(error)"])
            throw HTTPError(.badRequest, message: "Malformed HTTP request")
        } catch is NIOTooManyBytesError {
            throw HTTPError(.contentTooLarge, message: "Request body too large")
        }
    }
}
