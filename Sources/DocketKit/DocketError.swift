import DocketModel
import Foundation

/// Everything that can go wrong talking to an instance: one struct, so that new kinds never break callers.
///
/// ```swift
/// do { _ = try await client.table.record(id, in: "incident") }
/// catch let error as DocketError where error.status == 404 { print("gone") }
/// ```
public struct DocketError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// No response: the instance could not be reached.
        public static let transport = Kind("transport")
        /// The instance answered with an error status.
        public static let http = Kind("http")
        /// The response could not be read.
        public static let decoding = Kind("decoding")
        /// A request could not be built from the arguments.
        public static let invalidRequest = Kind("invalidRequest")
        /// A saved login (refresh token or session cookie) has expired or was ended: log in again.
        public static let loginExpired = Kind("loginExpired")
        /// A live stream cannot resume where it was: the instance's event log no longer reaches back. Read the
        /// current state again and follow from now.
        public static let resyncNeeded = Kind("resyncNeeded")

        /// The kind's name.
        public var description: String { name }
    }

    /// The kind of failure.
    public let kind: Kind
    /// The HTTP status, for ``Kind/http``.
    public let status: Int?
    /// The server's message (`error.message` of ServiceNow's envelope) or a summary.
    public let message: String
    /// The server's detail, if any.
    public let detail: String?
    /// `METHOD URL` of the request, without credentials.
    public let request: String?
    /// The underlying error, for transport and decoding failures.
    public let underlying: (any Error)?
    /// How many seconds the instance asked to wait before trying again (`Retry-After` of a 429 or 503).
    public let retryAfter: Int?
    /// The body of an HTTP error answer (a 412's current record, for instance).
    public let responseBody: Data?

    init(
        kind: Kind, status: Int? = nil, message: String, detail: String? = nil, request: String? = nil,
        underlying: (any Error)? = nil, retryAfter: Int? = nil, responseBody: Data? = nil
    ) {
        self.kind = kind
        self.status = status
        self.message = message
        self.detail = detail
        self.request = request
        self.underlying = underlying
        self.retryAfter = retryAfter
        self.responseBody = responseBody
    }

    /// A transport failure: no answer within `limit` (for a caller that bounds a request itself).
    public static func noAnswer(within limit: Duration) -> DocketError {
        DocketError(kind: .transport, message: "the instance did not answer within \(limit)")
    }

    static func transport(_ error: any Error, request: HTTPRequestData) -> DocketError {
        let host = request.url.host ?? request.url.absoluteString
        let port = request.url.port.map { ":\($0)" } ?? ""
        return DocketError(
            kind: .transport, message: "cannot reach \(host)\(port)", detail: (error as NSError).localizedDescription,
            request: "\(request.method) \(request.url.absoluteString)", underlying: error
        )
    }

    static func http(_ response: HTTPResponseData, request: HTTPRequestData) -> DocketError {
        var message = HTTPURLResponseStatus.text(response.status)
        var detail: String? = nil
        if let body = try? JSONValue.parse(response.body) {
            if let error = body["error"], case .object = error {
                message = error["message"]?.stringValue ?? message
                detail = error["detail"]?.stringValue
            } else if let description = body["error_description"]?.stringValue {
                message = description
            } else if let text = (body["message"] ?? body["Message"])?.stringValue, !text.isEmpty {
                // Compass: `{status, message}`; ETO: `{Message}`.
                message = text
            }
        }
        let retryAfter = response.header("retry-after").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        return DocketError(
            kind: .http, status: response.status, message: message, detail: detail?.isEmpty == true ? nil : detail,
            request: "\(request.method) \(request.url.absoluteString)", retryAfter: retryAfter.map { max(0, $0) },
            responseBody: response.body
        )
    }

    static func decoding(_ error: any Error, request: HTTPRequestData) -> DocketError {
        DocketError(
            kind: .decoding, message: "unexpected response from the instance", detail: "\(error)",
            request: "\(request.method) \(request.url.absoluteString)", underlying: error
        )
    }

    /// A sentence a person can act on.
    public var description: String {
        switch (kind, status) {
        case (.http, 401): return "wrong user name or password (\(message))"
        case (.http, 403): return "not allowed: \(detail ?? message)"
        case (.http, 429):
            let wait = retryAfter.map { $0 == 1 ? "1 second" : "\($0) seconds" } ?? "a while"
            return "too many attempts: try again in \(wait) (\(detail ?? message))"
        case (.http, let status?):
            return "\(message)\(detail.map { ": \($0)" } ?? "") (HTTP \(status))"
        default:
            return detail.map { "\(message): \($0)" } ?? message
        }
    }
}

enum HTTPURLResponseStatus {
    static func text(_ status: Int) -> String {
        switch status {
        case 400: return "Bad request"
        case 401: return "Not authenticated"
        case 403: return "Forbidden"
        case 404: return "Not found"
        case 429: return "Too many requests"
        case 500...599: return "Server error"
        default: return "HTTP \(status)"
        }
    }
}
