import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdAuth
import NIOCore
import NIOHTTP1

/// An error of the DataSync dialect, answered in GraphQL's shape: `{"errors":[{"message","extensions":{"code"}}]}`.
struct DataSyncHTTPError: HTTPResponseError {
    let status: HTTPResponse.Status
    let message: String
    let code: String
    var headers: HTTPFields = [:]

    static var unauthenticated: DataSyncHTTPError {
        var error = DataSyncHTTPError(
            status: .unauthorized, message: "Authentication required: send a bearer token or Basic credentials",
            code: "UNAUTHENTICATED"
        )
        error.headers[.wwwAuthenticate] = "Bearer realm=\"docket\""
        return error
    }

    static var invalidToken: DataSyncHTTPError {
        var error = DataSyncHTTPError(
            status: .unauthorized, message: "The bearer token is not valid (unknown, expired or revoked)",
            code: "UNAUTHENTICATED"
        )
        error.headers[.wwwAuthenticate] = "Bearer realm=\"docket\", error=\"invalid_token\""
        return error
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let body = JSONValue(members: [
            ("errors", .array([.object(["message": .string(message), "extensions": .object(["code": .string(code)])])]))
        ])
        var response = Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body.serialized()))
        )
        for field in headers { response.headers.append(field) }
        return response
    }
}

/// The DataSync dialect's own error middleware and authenticator, for its route group (`/graphql`): every
/// failure is answered in GraphQL's error shape, and a caller comes from a bearer token (docketd's OAuth
/// tokens) or Basic credentials (throttled like every login). No session cookie is issued or accepted.
struct DataSyncMiddleware: RouterMiddleware {
    typealias Context = DocketRequestContext

    let identity: Identity

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            var context = context
            (context.caller, context.credential) = try await authenticate(request, context: context)
            return try await next(request, context)
        } catch let error as DataSyncHTTPError {
            throw error
        } catch let refusal as Identity.Refusal {
            throw Self.error(for: refusal)
        } catch let error as HTTPError where error.status == .notFound {
            // No route took it: a method other than GET and POST on the endpoint, or a path below it.
            guard request.uri.path == "/graphql" else {
                throw DataSyncHTTPError(status: .notFound, message: "Not found: the GraphQL endpoint is /graphql", code: "NOT_FOUND")
            }
            var refusal = DataSyncHTTPError(
                status: .methodNotAllowed, message: "Send GraphQL requests with GET or POST", code: "METHOD_NOT_ALLOWED"
            )
            refusal.headers[.allow] = "GET, POST"
            throw refusal
        } catch let error as HTTPError {
            throw DataSyncHTTPError(
                status: error.status, message: error.body ?? error.status.reasonPhrase, code: "BAD_REQUEST"
            )
        } catch let error as EngineError {
            throw DataSyncHTTPError(status: .badRequest, message: error.description, code: "BAD_REQUEST")
        } catch let error as StorageUnavailable {
            context.logger.warning("DataSync request refused: the database is unavailable", metadata: ["error": "\(error)"])
            var refusal = DataSyncHTTPError(
                status: .serviceUnavailable, message: "The service is unavailable; try again shortly", code: "UNAVAILABLE"
            )
            refusal.headers[.retryAfter] = StorageUnavailable.retryAfter
            throw refusal
        } catch let error as HTTPParserError {
            // A malformed body (bad chunk framing, a body shorter than announced) only shows when it is read.
            throw DataSyncHTTPError(status: .badRequest, message: "Malformed HTTP request: \(error)", code: "BAD_REQUEST")
        } catch is NIOTooManyBytesError {
            throw DataSyncHTTPError(status: .contentTooLarge, message: "Request body too large", code: "BAD_REQUEST")
        } catch {
            context.logger.error("DataSync request failed", metadata: ["error": "\(error)"])
            throw DataSyncHTTPError(status: .internalServerError, message: "Internal error", code: "INTERNAL_SERVER_ERROR")
        }
    }

    private func authenticate(_ request: Request, context: Context) async throws -> (Caller, PresentedCredential) {
        if let bearer = request.headers.bearer {
            let (caller, credential, _) = try await identity.bearer(bearer.token)
            return (caller, credential)
        }
        if let basic = request.headers.basic {
            let (caller, token) = try await identity.login(
                userName: basic.username, password: basic.password, address: context.clientAddress,
                client: AuthMiddleware.client(request, context: context)
            )
            return (caller, .session(token))
        }
        throw Identity.Refusal.missing
    }

    /// A refusal to establish the caller, in DataSync's words.
    static func error(for refusal: Identity.Refusal) -> DataSyncHTTPError {
        var error: DataSyncHTTPError
        switch refusal {
        case .invalidToken: error = .invalidToken
        case .missing, .rejected, .sessionEnded: error = .unauthenticated
        case .throttled:
            error = DataSyncHTTPError(status: .tooManyRequests, message: "Too many failed login attempts", code: "TOO_MANY_REQUESTS")
        case .busy, .unavailable:
            error = DataSyncHTTPError(
                status: .serviceUnavailable, message: "Logins cannot be checked right now; try again", code: "UNAVAILABLE"
            )
        }
        error.headers[.retryAfter] = refusal.retryAfter
        return error
    }
}

extension DataSyncController {
    /// The DataSync dialect's router, mounted at `/graphql`: every request there, including methods and paths
    /// no route takes, passes its authenticator and is answered in GraphQL's error shape.
    static func mount(
        _ controller: DataSyncController, configuration: Configuration, identity: Identity
    ) -> DialectMount {
        let router = Router(context: Context.self)
        router.add(middleware: BodyLimitMiddleware(maxBodySize: configuration.maxBodySize))
        router.add(middleware: DataSyncMiddleware(identity: identity))
        router.addRoutes(controller.endpoints, atPath: "/graphql")
        return DialectMount(name: "datasync", prefix: "/graphql", responder: router.buildResponder())
    }
}
