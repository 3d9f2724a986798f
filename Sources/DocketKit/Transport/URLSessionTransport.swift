import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Security)
    import Security
#endif

/// The default ``Transport``, on `URLSession`. Cookies are handled by ``DocketSession``, not by the URL
/// loading system, so that each client keeps its own session.
public final class URLSessionTransport: Transport {
    private let session: URLSession
    private let challenges: ChallengeDecliner
    private let timeout: TimeInterval
    private let trusted: TrustedCertificates?

    /// Creates a transport with an ephemeral session and the given request timeout. On Apple platforms
    /// `certificates` are trusted besides the system's; on Linux `URLSession` trusts only the system's store
    /// (``Transports/platform(trusting:)`` picks a transport that can).
    public init(timeout: TimeInterval = 60, trusting certificates: TrustedCertificates? = nil) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.urlCredentialStorage = nil
        configuration.timeoutIntervalForRequest = timeout
        self.timeout = timeout
        self.trusted = certificates
        challenges = ChallengeDecliner(trusting: certificates)
        session = URLSession(configuration: configuration, delegate: challenges, delegateQueue: nil)
    }

    deinit { session.finishTasksAndInvalidate() }

    /// Sends the request; a 401 comes back as a response, not as an authentication challenge.
    public func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        urlRequest.httpBody = request.body
        let taskID = Mutex<Int?>(nil)
        let challenges = self.challenges
        let started = Mutex<URLSessionDataTask?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponseData, any Error>) in
                let task = session.dataTask(with: urlRequest) { data, response, error in
                    let id = taskID.withLock { $0 }
                    // A declined challenge cancels the task; the 401 that carried it is the answer.
                    if let id, let challenged = challenges.take(id) {
                        continuation.resume(
                            returning: HTTPResponseData(status: challenged.statusCode, headers: Self.headers(of: challenged))
                        )
                    } else if let error {
                        continuation.resume(throwing: error)
                    } else if let http = response as? HTTPURLResponse {
                        continuation.resume(
                            returning: HTTPResponseData(status: http.statusCode, headers: Self.headers(of: http), body: data ?? Data())
                        )
                    } else {
                        continuation.resume(throwing: URLError(.badServerResponse))
                    }
                }
                taskID.withLock { $0 = task.taskIdentifier }
                started.withLock { $0 = task }
                task.resume()
            }
        } onCancel: {
            started.withLock { $0?.cancel() }
        }
    }

    static func headers(of http: HTTPURLResponse) -> [String: [String]] {
        var headers: [String: [String]] = [:]
        for (name, value) in http.allHeaderFields {
            guard let name = name as? String, let value = value as? String else { continue }
            let key = name.lowercased()
            // Foundation joins repeated Set-Cookie headers with commas; split them back at cookie boundaries.
            headers[key, default: []] += key == "set-cookie" ? splitCookies(value) : [value]
        }
        return headers
    }

    /// Splits a comma-joined Set-Cookie value. A comma starts a new cookie only when `name=` follows it,
    /// which never happens inside an `Expires=Wed, 21 Oct 2026 07:28:00 GMT` date.
    static func splitCookies(_ joined: String) -> [String] {
        var cookies: [String] = []
        var current = ""
        for part in joined.components(separatedBy: ",") {
            let startsCookie = part.range(of: #"^\s*[^;,=\s]+="#, options: .regularExpression) != nil
            if startsCookie, !current.isEmpty {
                cookies.append(current.trimmingCharacters(in: .whitespaces))
                current = part
            } else {
                current += current.isEmpty ? part : "," + part
            }
        }
        if !current.trimmingCharacters(in: .whitespaces).isEmpty {
            cookies.append(current.trimmingCharacters(in: .whitespaces))
        }
        return cookies
    }
}

extension URLSessionTransport: StreamingTransport {
    /// Streams a response through its own `URLSession` with a data delegate (which works on Linux too; the
    /// byte-stream API does not exist there). The request timeout applies between chunks: keep it above the
    /// server's heartbeat interval.
    public func stream(_ request: HTTPRequestData) async throws -> StreamingResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        urlRequest.httpBody = request.body
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.urlCredentialStorage = nil
        configuration.timeoutIntervalForRequest = timeout
        let delegate = StreamDelegate(trusting: trusted)
        let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
        let task = session.dataTask(with: urlRequest)
        let (chunks, continuation) = AsyncThrowingStream<Data, any Error>.makeStream()
        continuation.onTermination = { _ in
            task.cancel()
            session.invalidateAndCancel()
        }
        return try await withTaskCancellationHandler {
            let head = try await withCheckedThrowingContinuation { (head: CheckedContinuation<HTTPResponseData, any Error>) in
                delegate.start(head: head, chunks: continuation)
                task.resume()
            }
            return StreamingResponse(head: head, chunks: chunks)
        } onCancel: {
            continuation.finish(throwing: CancellationError())
        }
    }
}

/// Hands a streamed response's head and chunks to their continuations; declines authentication challenges
/// like ``ChallengeDecliner`` (the 401 that carried one is the answer).
private final class StreamDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private struct State {
        var head: CheckedContinuation<HTTPResponseData, any Error>?
        var chunks: AsyncThrowingStream<Data, any Error>.Continuation?
    }

    private let state = Mutex(State())
    private let trusted: TrustedCertificates?

    init(trusting certificates: TrustedCertificates?) { trusted = certificates }

    func start(
        head: CheckedContinuation<HTTPResponseData, any Error>, chunks: AsyncThrowingStream<Data, any Error>.Continuation
    ) {
        state.withLock { $0 = State(head: head, chunks: chunks) }
    }

    private func answer(_ response: HTTPURLResponse) {
        let head = state.withLock { state in
            defer { state.head = nil }
            return state.head
        }
        head?.resume(returning: HTTPResponseData(status: response.statusCode, headers: URLSessionTransport.headers(of: response)))
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        if let http = response as? HTTPURLResponse { answer(http) }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        _ = state.withLock { $0.chunks }?.yield(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (head, chunks) = state.withLock { state in
            defer { state = State() }
            return (state.head, state.chunks)
        }
        head?.resume(throwing: error ?? URLError(.badServerResponse))
        if let error { chunks?.finish(throwing: error) } else { chunks?.finish() }
        session.finishTasksAndInvalidate()
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        if let answer = ServerTrust.answer(challenge, trusting: trusted) { return completionHandler(answer.0, answer.1) }
        if let failure = challenge.failureResponse as? HTTPURLResponse {
            answer(failure)
            state.withLock { $0.chunks }?.finish()
        }
        completionHandler(.rejectProtectionSpace, nil)
    }
}

/// Declines HTTP authentication challenges and keeps the 401 that carried them, so that ``DocketSession``
/// decides how to log in again. (Default handling stalls on Linux when a 401 carries `WWW-Authenticate`.)
private final class ChallengeDecliner: NSObject, URLSessionTaskDelegate, Sendable {
    private let failures = Mutex<[Int: HTTPURLResponse]>([:])
    private let trusted: TrustedCertificates?

    init(trusting certificates: TrustedCertificates?) { trusted = certificates }

    func take(_ taskID: Int) -> HTTPURLResponse? {
        failures.withLock { $0.removeValue(forKey: taskID) }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        if let answer = ServerTrust.answer(challenge, trusting: trusted) { return completionHandler(answer.0, answer.1) }
        if let failure = challenge.failureResponse as? HTTPURLResponse {
            failures.withLock { $0[task.taskIdentifier] = failure }
        }
        completionHandler(.rejectProtectionSpace, nil)
    }
}

/// The server's certificate, judged with the trusted certificates as extra anchors (Apple platforms).
enum ServerTrust {
    /// The answer to a server trust challenge; nil for other challenges. Without extra certificates, the system
    /// judges as usual.
    static func answer(
        _ challenge: URLAuthenticationChallenge, trusting certificates: TrustedCertificates?
    ) -> (URLSession.AuthChallengeDisposition, URLCredential?)? {
        #if canImport(Security)
            guard challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodServerTrust,
                let trust = challenge.protectionSpace.serverTrust
            else { return nil }
            guard let certificates else { return (.performDefaultHandling, nil) }
            let anchors = certificates.certificates.compactMap { SecCertificateCreateWithData(nil, $0 as CFData) }
            SecTrustSetAnchorCertificates(trust, anchors as CFArray)
            SecTrustSetAnchorCertificatesOnly(trust, false)
            guard SecTrustEvaluateWithError(trust, nil) else { return (.cancelAuthenticationChallenge, nil) }
            return (.useCredential, URLCredential(trust: trust))
        #else
            return nil
        #endif
    }
}
