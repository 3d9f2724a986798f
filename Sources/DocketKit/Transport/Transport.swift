import Foundation

/// An HTTP request as DocketKit sends it.
public struct HTTPRequestData: Sendable {
    /// `GET`, `POST`, …
    public var method: String
    /// The absolute URL.
    public var url: URL
    /// Header fields; names are case-insensitive.
    public var headers: [String: String]
    /// The body, if any.
    public var body: Data?

    /// Creates a request.
    public init(method: String, url: URL, headers: [String: String] = [:], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// An HTTP response as a ``Transport`` returns it.
public struct HTTPResponseData: Sendable {
    /// The status code.
    public var status: Int
    /// Header fields, names lower-cased. `set-cookie` may hold several values, one per element.
    public var headers: [String: [String]]
    /// The body (empty when there was none).
    public var body: Data

    /// Creates a response.
    public init(status: Int, headers: [String: [String]] = [:], body: Data = Data()) {
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: +)
        self.body = body
    }

    /// The first value of a header.
    public func header(_ name: String) -> String? { headers[name.lowercased()]?.first }
}

/// Sends HTTP requests. ``URLSessionTransport`` is the default; tests and apps can supply their own.
public protocol Transport: Sendable {
    /// Sends a request and returns the response, whatever its status. Throws only when no response came.
    func send(_ request: HTTPRequestData) async throws -> HTTPResponseData
}

/// A response whose body arrives over time (a live event stream).
public struct StreamingResponse: Sendable {
    /// The status and headers (the body is empty: it is in `chunks`).
    public var head: HTTPResponseData
    /// The body, as it arrives; ends when the server ends the response, throws when the connection fails.
    public var chunks: AsyncThrowingStream<Data, any Error>

    /// Creates a streaming response.
    public init(head: HTTPResponseData, chunks: AsyncThrowingStream<Data, any Error>) {
        self.head = head
        self.chunks = chunks
    }
}

/// A ``Transport`` that can also hand a response's body over as it arrives (for ``LiveUpdates``).
public protocol StreamingTransport: Transport {
    /// Sends a request and returns as soon as the response head arrived. Cancelling the consuming task, or
    /// dropping `chunks`, closes the connection.
    func stream(_ request: HTTPRequestData) async throws -> StreamingResponse
}
