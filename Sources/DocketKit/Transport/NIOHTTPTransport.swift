#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL

/// A ``StreamingTransport`` on SwiftNIO's HTTP client, for Linux where `URLSession` trusts only the system's
/// certificate store: it trusts the given certificates as well (``Transports/platform(trusting:)``).
public final class NIOHTTPTransport: StreamingTransport {
    private let client: HTTPClient
    private let timeout: TimeAmount

    /// The longest response body read into memory.
    static let maximumBody = 256 * 1024 * 1024

    /// Creates a transport whose TLS connections also trust `certificates`. With `followingRedirects` false, a
    /// redirect is answered as it came (a client that keeps cookies of its own follows it itself).
    public init(trusting certificates: TrustedCertificates?, timeout: TimeInterval = 60, followingRedirects: Bool = true) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let certificates { tls.additionalTrustRoots = [.file(certificates.pemFile)] }
        let seconds = Int64(max(1, timeout))
        let configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: followingRedirects ? .follow(max: 5, allowCycles: false) : .disallow,
            timeout: .init(connect: .seconds(min(seconds, 30)), read: .seconds(seconds))
        )
        self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.timeout = .seconds(seconds)
    }

    deinit { client.shutdown { _ in } }

    public func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
        let response = try await client.execute(Self.request(request), timeout: timeout)
        let body = try await response.body.collect(upTo: Self.maximumBody)
        return HTTPResponseData(status: Int(response.status.code), headers: Self.headers(response.headers), body: Data(body.readableBytesView))
    }

    public func stream(_ request: HTTPRequestData) async throws -> StreamingResponse {
        // The stream lasts as long as the server keeps sending (heartbeats keep it under the read timeout).
        let response = try await client.execute(Self.request(request), deadline: .distantFuture)
        let head = HTTPResponseData(status: Int(response.status.code), headers: Self.headers(response.headers))
        let body = response.body
        let chunks = AsyncThrowingStream<Data, any Error> { continuation in
            let task = Task {
                do {
                    for try await buffer in body { continuation.yield(Data(buffer.readableBytesView)) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
        return StreamingResponse(head: head, chunks: chunks)
    }

    private static func request(_ request: HTTPRequestData) -> HTTPClientRequest {
        var outgoing = HTTPClientRequest(url: request.url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.headers { outgoing.headers.replaceOrAdd(name: name, value: value) }
        if let body = request.body { outgoing.body = .bytes(ByteBuffer(bytes: body)) }
        return outgoing
    }

    private static func headers(_ headers: HTTPHeaders) -> [String: [String]] {
        var result: [String: [String]] = [:]
        for (name, value) in headers { result[name.lowercased(), default: []].append(value) }
        return result
    }
}
#endif
