import Hummingbird
import NIOCore
import NIOHTTP1

/// Answers requests whose body turned out to be malformed HTTP (a bad chunk size, a truncated chunk) with 400,
/// and bodies over the limit with 413, on the root router's routes (`/oauth_token.do`, `/logout.do`, `/health`).
/// Reading a body is where these surface, long after the head was routed; unmapped they would be 500s. Each
/// dialect's router words the same errors in its own envelope.
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
