import DocketModel
import Foundation

/// ServiceNow's Batch API (`POST /api/now/v1/batch`): several REST requests in one round trip, run in order as the
/// caller, each answered on its own.
public struct BatchService: Sendable {
    let session: DocketSession

    /// One request of a batch.
    public struct Request: Sendable {
        public var id: String
        public var method: String
        /// Path and query below `/api/` (`/api/now/table/incident?sysparm_fields=number`).
        public var url: String
        public var headers: [String: String]
        public var body: Data?

        public init(id: String, method: String, url: String, headers: [String: String] = [:], body: Data? = nil) {
            self.id = id
            self.method = method
            self.url = url
            self.headers = headers
            self.body = body
        }
    }

    /// The answer to one request.
    public struct Answer: Sendable {
        public var id: String
        public var status: Int
        /// Header names lower-cased.
        public var headers: [String: String]
        public var body: Data
    }

    /// The answers, in order, and the ids of requests the instance did not get to (send those again).
    public struct Result: Sendable {
        public var answers: [Answer]
        public var unserviced: [String]
    }

    public func send(_ requests: [Request]) async throws -> Result {
        let entries: [JSONValue] = requests.map { request in
            var headers: [JSONValue] = [.object(["name": .string("Accept"), "value": .string("application/json")])]
            if request.body != nil { headers.append(.object(["name": .string("Content-Type"), "value": .string("application/json")])) }
            for (name, value) in request.headers.sorted(by: { $0.key < $1.key }) {
                headers.append(.object(["name": .string(name), "value": .string(value)]))
            }
            var members: [(String, JSONValue)] = [
                ("id", .string(request.id)), ("method", .string(request.method)), ("url", .string(request.url)), ("headers", .array(headers)),
            ]
            if let body = request.body { members.append(("body", .string(body.base64EncodedString()))) }
            return JSONValue(members: members)
        }
        let body = JSONValue(members: [("batch_request_id", .string(UUID().uuidString)), ("rest_requests", .array(entries))])
        let response = try await session.send("POST", "/api/now/v1/batch", body: Data(body.serialized()))
        let json = try TableService.parse(response)
        let answers = (json["serviced_requests"]?.arrayValue ?? []).map { answer in
            Answer(
                id: answer["id"]?.stringValue ?? "", status: answer["status_code"]?.intValue ?? 0,
                headers: (answer["headers"]?.arrayValue ?? []).reduce(into: [:]) { headers, header in
                    if let name = header["name"]?.stringValue { headers[name.lowercased()] = header["value"]?.stringValue ?? "" }
                },
                body: Data(base64Encoded: answer["body"]?.stringValue ?? "") ?? Data()
            )
        }
        return Result(answers: answers, unserviced: (json["unserviced_requests"]?.arrayValue ?? []).compactMap(\.stringValue))
    }
}

extension DocketClient {
    /// The Batch API.
    public var batch: BatchService { BatchService(session: session) }
}
