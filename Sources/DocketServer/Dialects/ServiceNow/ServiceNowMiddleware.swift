import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1

/// Wraps every ServiceNow API request (``ServiceNowAPI``, everything below `/api`): checks content negotiation,
/// adds ServiceNow's common headers, and turns every
/// error (engine, routing, anything unexpected) into the ServiceNow envelope, so no raw 500 page or stack
/// trace ever reaches a client.
struct ServiceNowMiddleware: RouterMiddleware {
    typealias Context = DocketRequestContext

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response: Response
        do {
            try Self.checkNegotiation(request)
            response = try await next(request, context)
        } catch let error as ServiceNowError {
            response = try error.response(from: request, context: context)
        } catch let refusal as Identity.Refusal {
            response = try ServiceNowError(refusal).response(from: request, context: context)
        } catch let error as EngineError {
            response = try ServiceNowError(error).response(from: request, context: context)
        } catch let error as HTTPError {
            response = try Self.translate(error).response(from: request, context: context)
        } catch let error as StorageUnavailable {
            context.logger.warning("Request refused: the database is unavailable", metadata: ["error": "\(error)"])
            response = try ServiceNowError(LoginFailure.unavailable).response(from: request, context: context)
        } catch let error as HTTPParserError {
            // A malformed body (bad chunk framing) only shows when a handler reads it.
            response = try ServiceNowError(.badRequest, "Malformed HTTP request", detail: "\(error)")
                .response(from: request, context: context)
        } catch is NIOTooManyBytesError {
            response = try ServiceNowError(.contentTooLarge, "Request body too large")
                .response(from: request, context: context)
        } catch {
            context.logger.error("Unexpected error", metadata: ["error": "\(String(reflecting: error))"])
            response = try ServiceNowError(.internalServerError, "Internal server error", detail: nil)
                .response(from: request, context: context)
        }
        // Handlers never set these, so appending (no search for an existing value) is enough.
        response.headers.append(contentsOf: response.status == .unauthorized ? Self.loggedOutHeaders : Self.loggedInHeaders)
        return response
    }

    private static func commonHeaders(loggedIn: Bool) -> HTTPFields {
        [
            .cacheControl: "no-cache,no-store,must-revalidate,max-age=-1", .pragma: "no-store,no-cache", .expires: "0",
            .xContentTypeOptions: "nosniff", .xIsLoggedIn: loggedIn ? "true" : "false",
        ]
    }

    private static let loggedInHeaders = commonHeaders(loggedIn: true)
    private static let loggedOutHeaders = commonHeaders(loggedIn: false)

    private static func translate(_ error: HTTPError) -> ServiceNowError {
        switch error.status {
        case .notFound: return .noResource
        case .methodNotAllowed: return ServiceNowError(.methodNotAllowed, "Method not Supported")
        case .contentTooLarge: return ServiceNowError(.contentTooLarge, "Request body too large")
        default: return ServiceNowError(error.status, error.body ?? error.status.reasonPhrase)
        }
    }

    /// JSON only: `Accept` must allow it (406 otherwise), and every `POST`, `PUT` or `PATCH` must say its body is
    /// JSON (415 otherwise, an empty body included). A browser can send `text/plain`, form-encoded and
    /// `multipart/form-data` bodies to another site without asking first, carrying cached Basic credentials;
    /// requiring JSON is what keeps such forged writes out. The Attachment API takes and returns files of any
    /// type: its uploads are checked by ``checkAttachmentUpload(_:)``.
    private static func checkNegotiation(_ request: Request) throws {
        let path = request.uri.path
        if path.hasPrefix("/api/now/attachment") || path.hasPrefix("/api/now/v1/attachment") {
            try checkAttachmentUpload(request)
            return
        }
        // The live event stream answers text/event-stream (its errors, before the stream starts, are JSON).
        if let accept = request.headers[.accept]?.lowercased(), !accept.isEmpty,
            !(path == "/api/docket/events" && accept.contains("text/event-stream")),
            !accept.contains("json"), !accept.contains("*/*"), !accept.contains("application/*")
        {
            throw ServiceNowError(.notAcceptable, "Requested response format is not supported", detail: accept)
        }
        if [.post, .put, .patch].contains(request.method) {
            let type = request.headers[.contentType]?.lowercased() ?? ""
            // No body at all (pysnc inserts a record with no fields so): nothing a browser could forge from another
            // site, unless the request says it comes from one.
            if type.isEmpty, hasNoBody(request), !isCrossOrigin(request) { return }
            guard isJSON(type) else {
                throw ServiceNowError(
                    .unsupportedMediaType, "Unsupported Media Type",
                    detail: type.isEmpty ? "Send the body as application/json" : "\(type): send the body as application/json"
                )
            }
        }
    }

    /// A request that declares no body: `Content-Length: 0`, or neither a length nor chunked transfer encoding.
    private static func hasNoBody(_ request: Request) -> Bool {
        if let length = request.headers[.contentLength] { return trimmed(length[...]) == "0" }
        return request.headers[.transferEncoding] == nil
    }

    /// `application/json`, `application/<anything>+json`, `text/json`, with or without parameters.
    static func isJSON(_ contentType: String) -> Bool {
        let essence = essence(of: contentType)
        return essence == "application/json" || essence == "text/json" || (essence.hasPrefix("application/") && essence.hasSuffix("+json"))
    }

    /// A media type without its parameters (`application/json; charset=utf-8` → `application/json`).
    static func essence(of contentType: String) -> Substring {
        trimmed(contentType.prefix { $0 != ";" })
    }

    /// Without the spaces and tabs around it (a header value's optional white space), and without Foundation's
    /// character sets: this runs for every request.
    private static func trimmed(_ text: Substring) -> Substring {
        var text = text
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }

    /// The media types a browser may send to another origin without a preflight request.
    private static let simpleTypes: Set<String> = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]

    /// An attachment upload is a file of any type, so its content type cannot tell a script from a forged
    /// browser form. Browsers name the page a cross-origin request comes from in `Origin` (and say
    /// `Sec-Fetch-Site: cross-site`); an upload with one of the types a page may send without a preflight is
    /// refused with 415 when it comes from another origin. API clients send neither header.
    private static func checkAttachmentUpload(_ request: Request) throws {
        guard request.method == .post else { return }
        let type = request.headers[.contentType]?.lowercased() ?? ""
        let essence = String(essence(of: type))
        guard essence.isEmpty || simpleTypes.contains(essence) else { return }
        if isCrossOrigin(request) {
            throw ServiceNowError(
                .unsupportedMediaType, "Unsupported Media Type",
                detail: "Cross-origin uploads of \(essence.isEmpty ? "untyped bodies" : essence) are refused"
            )
        }
    }

    private static func isCrossOrigin(_ request: Request) -> Bool {
        if let site = request.headers[.secFetchSite]?.lowercased(), site == "cross-site" || site == "same-site" { return true }
        guard let origin = request.headers[.origin], !origin.isEmpty else { return false }
        guard let host = request.head.authority else { return true }
        let originHost = origin.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first.map(String.init)
        return originHost?.lowercased() != host.lowercased()
    }
}

extension HTTPField.Name {
    static let xIsLoggedIn = Self("X-Is-Logged-In")!
    static let xTotalCount = Self("X-Total-Count")!
    static let xNoResponseBody = Self("X-no-response-body")!
    static let xContentTypeOptions = Self("X-Content-Type-Options")!
    static let link = Self("Link")!
    static let pragma = Self("Pragma")!
    static let secFetchSite = Self("Sec-Fetch-Site")!
}
