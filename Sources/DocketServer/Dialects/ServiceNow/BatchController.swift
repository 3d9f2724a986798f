import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import Synchronization

/// The Batch API: `POST /api/now/v1/batch`. Each `rest_requests` entry (method, relative URL, headers, base64
/// body) runs through the same router as a normal request, as the caller of the batch; answers come back
/// base64-encoded in `serviced_requests`. Requests not started before the time budget runs out are listed
/// in `unserviced_requests` (clients such as pysnc resend those).
struct BatchController {
    typealias Context = DocketRequestContext

    /// The router's responder, set once the router is complete (the batch endpoint is part of it).
    final class ResponderBox: Sendable {
        private let responder = Mutex<RouterResponder<Context>?>(nil)

        func set(_ value: RouterResponder<Context>) { responder.withLock { $0 = value } }
        var value: RouterResponder<Context>? { responder.withLock { $0 } }
    }

    let responder: ResponderBox
    /// ServiceNow cancels batch transactions after 30 seconds.
    var timeBudget: Duration = .seconds(30)
    var maxRequests = 1000

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.post(use: batch)
        return routes
    }

    private struct SubRequest {
        var id: String
        var method: HTTPRequest.Method
        var url: String
        var headers: HTTPFields
        var body: [UInt8]
        var excludeResponseHeaders: Bool
    }

    @Sendable func batch(_ request: Request, context: Context) async throws -> Response {
        _ = try context.requireCaller()
        let body = try await RequestBody.json(from: request, context: context)
        guard case .object = body, case .array(let entries)? = body["rest_requests"] else {
            throw ServiceNowError.badRequest(
                "Invalid batch request", detail: "The body must be an object with a rest_requests array"
            )
        }
        guard entries.count <= maxRequests else {
            throw ServiceNowError.badRequest("Too many requests", detail: "A batch holds at most \(maxRequests) requests")
        }
        let requests = try entries.enumerated().map { try Self.parse($0.element, index: $0.offset) }
        let batchID: String
        switch body["batch_request_id"] {
        case .string(let text)?: batchID = text
        case .integer(let number)?: batchID = String(number)
        case .number(let number)?: batchID = JSONNumberText.of(number)
        default: batchID = ""
        }
        guard let responder = responder.value else { throw ServiceNowError(.serviceUnavailable, "Batch API not ready") }
        let clock = ContinuousClock()
        let deadline = clock.now + timeBudget
        var serviced: [JSONValue] = []
        var unserviced: [JSONValue] = []
        for sub in requests {
            guard clock.now < deadline else {
                unserviced.append(.string(sub.id))
                continue
            }
            let started = clock.now
            let answer = try await run(sub, responder: responder, outer: request, context: context)
            let elapsed = clock.now - started
            serviced.append(answer.json(id: sub.id, includeHeaders: !sub.excludeResponseHeaders, elapsed: elapsed))
        }
        return Response.json(.object([
            "batch_request_id": .string(batchID), "serviced_requests": .array(serviced),
            "unserviced_requests": .array(unserviced)]))
    }

    private struct Answer {
        var status: HTTPResponse.Status
        var headers: HTTPFields
        var body: [UInt8]

        func json(id: String, includeHeaders: Bool, elapsed: Duration) -> JSONValue {
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            var members: [(String, JSONValue)] = [
                ("id", .string(id)), ("status_code", .integer(status.code)),
                ("status_text", .string(status.reasonPhrase)),
            ]
            if includeHeaders {
                members.append(("headers", .array(headers.map {
                    .object(["name": .string($0.name.canonicalName), "value": .string($0.value)])
                })))
            }
            members.append(("body", .string(Data(body).base64EncodedString())))
            members.append(("execution_time", .integer(Int((seconds * 1000).rounded()))))
            return JSONValue(members: members)
        }
    }

    private func run(_ sub: SubRequest, responder: RouterResponder<Context>, outer: Request, context: Context)
        async throws -> Answer
    {
        guard sub.url.hasPrefix("/api/"), !sub.url.contains("/batch") else {
            return Self.error(.badRequest, "Invalid URL", detail: "Batch requests must address a REST API below /api/")
        }
        var head = HTTPRequest(method: sub.method, scheme: outer.head.scheme, authority: outer.head.authority, path: sub.url)
        head.headerFields = sub.headers
        // The sub-request runs as the batch's caller; credentials inside it are not consulted.
        head.headerFields[.authorization] = nil
        head.headerFields[.cookie] = nil
        let subRequest = Request(head: head, body: .init(buffer: ByteBuffer(bytes: sub.body)))
        var subContext = context
        subContext.isSubRequest = true
        let response = try await responder.respond(to: subRequest, context: subContext)
        let collector = ByteCollector()
        try await response.body.write(CollectingWriter(collector: collector))
        return Answer(status: response.status, headers: response.headers, body: collector.bytes)
    }

    private static func error(_ status: HTTPResponse.Status, _ message: String, detail: String) -> Answer {
        let body = JSONValue.object([
            "error": .object(["message": .string(message), "detail": .string(detail)]),
            "status": .string("failure")])
        return Answer(status: status, headers: [.contentType: "application/json"], body: body.serialized())
    }

    private static func parse(_ entry: JSONValue, index: Int) throws -> SubRequest {
        func invalid(_ detail: String) -> ServiceNowError {
            ServiceNowError.badRequest("Invalid batch request", detail: "rest_requests[\(index)]: \(detail)")
        }
        guard case .object = entry else { throw invalid("must be an object") }
        let id: String
        switch entry["id"] {
        case .string(let text)?: id = text
        case .integer(let number)?: id = String(number)
        case .number(let number)?: id = JSONNumberText.of(number)
        default: throw invalid("id is required")
        }
        guard case .string(let methodName)? = entry["method"],
            let method = HTTPRequest.Method(methodName.uppercased()),
            [.get, .post, .put, .patch, .delete].contains(method)
        else { throw invalid("method must be GET, POST, PUT, PATCH or DELETE") }
        guard case .string(let url)? = entry["url"], url.hasPrefix("/") else {
            throw invalid("url must be a path starting with /")
        }
        var headers: HTTPFields = [:]
        if case .array(let list)? = entry["headers"] {
            for header in list {
                guard case .string(let name)? = header["name"], case .string(let value)? = header["value"],
                    let fieldName = HTTPField.Name(name)
                else { throw invalid("headers must be {name, value} strings") }
                headers.append(HTTPField(name: fieldName, value: value))
            }
        }
        var body: [UInt8] = []
        if case .string(let encoded)? = entry["body"], !encoded.isEmpty {
            guard let data = Data(base64Encoded: encoded) else { throw invalid("body must be base64") }
            body = Array(data)
        }
        // pysnc prepares its requests with requests' default headers; a body without Content-Type is JSON.
        if !body.isEmpty, headers[.contentType] == nil { headers[.contentType] = "application/json" }
        headers[.contentLength] = body.isEmpty ? nil : String(body.count)
        var exclude = false
        if case .bool(let flag)? = entry["exclude_response_headers"] { exclude = flag }
        return SubRequest(id: id, method: method, url: url, headers: headers, body: body, excludeResponseHeaders: exclude)
    }
}

/// Collects a response body in memory (for batch sub-requests).
private final class ByteCollector {
    var bytes: [UInt8] = []
}

private struct CollectingWriter: ResponseBodyWriter {
    let collector: ByteCollector

    mutating func write(_ buffer: ByteBuffer) async throws { collector.bytes += buffer.readableBytesView }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
