import HTTPTypes
import DocketModel
import Hummingbird

/// An error answered in ServiceNow's envelope: `{"error":{"message","detail"},"status":"failure"}`.
struct ServiceNowError: HTTPResponseError {
    let status: HTTPResponse.Status
    let message: String
    let detail: String?
    var headers: HTTPFields = [:]
    /// A record that comes with the error (the current one, for a 412), as `result` beside `error`.
    var result: JSONValue? = nil

    init(_ status: HTTPResponse.Status, _ message: String, detail: String? = nil) {
        self.status = status
        self.message = message
        self.detail = detail
    }

    static var unauthenticated: ServiceNowError {
        var error = ServiceNowError(
            .unauthorized, "User is not authenticated", detail: "Required to provide Auth information"
        )
        error.headers[.wwwAuthenticate] = "Basic realm=\"Service-now\""
        return error
    }

    /// The answer to a failed login: 401, or 429 / 503 with `Retry-After` when the attempt was not checked.
    init(_ failure: LoginFailure) {
        switch failure {
        case .rejected:
            self = .unauthenticated
        case .throttled:
            self.init(
                .tooManyRequests, "Too many failed login attempts",
                detail: "Wait before trying again; the wait doubles with each further failure"
            )
        case .busy:
            self.init(.serviceUnavailable, "Server busy", detail: "Too many logins are being checked; try again shortly")
        case .unavailable:
            self.init(.serviceUnavailable, "Service unavailable", detail: "The database cannot be used right now; try again shortly")
        }
        headers[.retryAfter] = failure.retryAfter
    }

    /// The answer to credentials that did not establish a caller.
    init(_ refusal: Identity.Refusal) {
        switch refusal {
        case .missing, .rejected, .sessionEnded: self = .unauthenticated
        case .invalidToken:
            // ServiceNow's answer, and RFC 6750's challenge beside it: an OAuth or OpenID client knows to refresh.
            self = .unauthenticated
            headers.append(HTTPField(name: .wwwAuthenticate, value: #"Bearer realm="Service-now", error="invalid_token""#))
        default: self.init(refusal.loginFailure)
        }
    }

    static let noResource = ServiceNowError(.badRequest, "Requested URI does not represent any resource")

    static func badRequest(_ message: String, detail: String? = nil) -> ServiceNowError {
        ServiceNowError(.badRequest, message, detail: detail)
    }

    /// The envelope for an engine error, in ServiceNow's words for the common refusals.
    init(_ error: EngineError) {
        switch error.reason {
        case .unknownTable:
            self.init(.badRequest, "Invalid table \(error.table ?? "")")
        case .recordMissing:
            self.init(.notFound, "No Record found", detail: "Record doesn't exist or ACL restricts the record retrieval")
        case .accessDenied:
            let verb: String
            switch error.operation ?? .read {
            case .read: verb = "Read"
            case .create: verb = "Insert"
            case .write: verb = "Update"
            case .delete: verb = "Delete"
            }
            self.init(.forbidden, "Operation Failed", detail: "ACL Exception \(verb) Failed due to security constraints")
        case .queryNotAllowed:
            self.init(
                .forbidden, "Insufficient rights to query records",
                detail: "Field(s) present in the query do not have permission to be read"
            )
        case .changedSinceRead:
            self.init(.conflict, "Operation Failed", detail: "The record was changed by someone else; read it again")
        case nil:
            switch error.code {
            case .invalidTable, .badRequest: self.init(.badRequest, error.message, detail: error.detail)
            case .notFound: self.init(.notFound, error.message, detail: error.detail)
            case .forbidden, .forbiddenQuery: self.init(.forbidden, error.message, detail: error.detail)
            case .quotaExceeded: self.init(.contentTooLarge, error.message, detail: error.detail)
            case .conflict: self.init(.conflict, error.message, detail: error.detail)
            }
        }
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var members: [(String, JSONValue)] = [
            ("error", .object(["message": .string(message), "detail": detail.map(JSONValue.string) ?? .null])),
            ("status", .string("failure"))]
        if let result { members.append(("result", result)) }
        let body = JSONValue(members: members)
        var response = Response.json(body, status: status)
        for field in headers { response.headers.append(field) }
        return response
    }
}

extension Response {
    /// A JSON response in ServiceNow's content type.
    static func json(_ body: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        json(bytes: body.serialized(), status: status)
    }

    /// A JSON response from a writer's bytes.
    static func json(_ writer: JSONWriter, status: HTTPResponse.Status = .ok) -> Response {
        json(bytes: writer.bytes, status: status)
    }

    static func json(bytes: [UInt8], status: HTTPResponse.Status) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json;charset=UTF-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes))
        )
    }
}
