import DocketModel
import Hummingbird

/// How a dialect words an error's body (its status and message).
protocol DialectErrorShape: Sendable {
    static func body(status: HTTPResponse.Status, message: String) -> JSONValue
}

/// An error answered in a dialect's own JSON shape, with its status and any headers (`Retry-After`,
/// `WWW-Authenticate`).
struct DialectError<Shape: DialectErrorShape>: HTTPResponseError {
    let status: HTTPResponse.Status
    let message: String
    var headers: HTTPFields = [:]

    init(_ status: HTTPResponse.Status, _ message: String) {
        self.status = status
        self.message = message
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = Response.json(Shape.body(status: status, message: message), status: status)
        for field in headers { response.headers.append(field) }
        return response
    }

    /// 503 with `Retry-After`: the database (or password checking) cannot be used right now.
    static func unavailable(_ message: String) -> DialectError {
        var error = DialectError(.serviceUnavailable, message)
        error.headers[.retryAfter] = StorageUnavailable.retryAfter
        return error
    }
}

/// Compass: `{"status": Int, "message": String}`.
enum CompassErrorShape: DialectErrorShape {
    static func body(status: HTTPResponse.Status, message: String) -> JSONValue {
        JSONValue(members: [("status", .integer(status.code)), ("message", .string(message))])
    }
}

/// ETO: `{"Message": String}`, the shape of a WCF service's faults.
enum ETOErrorShape: DialectErrorShape {
    static func body(status: HTTPResponse.Status, message: String) -> JSONValue {
        JSONValue(members: [("Message", .string(message))])
    }
}

/// An error of the Compass dialect, answered as Compass answers them.
typealias CompassError = DialectError<CompassErrorShape>
/// An error of the ETO dialect, answered as ETO answers them.
typealias ETOError = DialectError<ETOErrorShape>
