import Hummingbird
import NIOCore

/// Per-request state: the authenticated caller, once a middleware has established who it is.
struct DocketRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    var caller: Caller? {
        didSet { notes.userName = caller?.userName }
    }
    /// What the request's log line and metrics report, shared by every copy of this context.
    let notes = RequestNotes()
    /// Set when authentication created or refreshed a session whose cookie the response must carry.
    var sessionCookie: String?
    var maxBodySize = 4 * 1024 * 1024
    /// How the caller authenticated, for long-lived responses that must end when it no longer holds.
    var credential: PresentedCredential?
    /// A request run inside a Batch API request: already authenticated and already counted by rate limits.
    var isSubRequest = false
    /// The request path's segments, percent-decoded, in their original case (ETO routes on the lower-cased path).
    var pathSegments: [String] = []
    /// The claims of the Compass token the request came with (the Compass dialect binds it to a repo and database).
    var compassClaims: CompassTokens.Claims?

    /// The client's IP address (login throttling counts failures per address); "unknown" when the transport
    /// has none.
    let clientAddress: String
    /// The channel the request came on (an HTTP/1.1 connection, or an HTTP/2 stream): long-lived responses
    /// watch it to notice a client that left (``Channel/whenClientLeaves(_:)``).
    let channel: any Channel

    init(source: Source) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
        self.clientAddress = source.channel.remoteAddress?.ipAddress ?? "unknown"
    }

    var maxUploadSize: Int { maxBodySize }

    /// The caller; routes behind a dialect's authentication always have one. Without one the refusal is
    /// ``Identity/Refusal/missing``, which each dialect's error middleware words in its own shape.
    func requireCaller() throws(Identity.Refusal) -> Caller {
        guard let caller else { throw .missing }
        return caller
    }
}

/// The credential a request authenticated with, as far as it can be checked again later: the session it
/// holds (Basic logins and session cookies), or the bearer token.
enum PresentedCredential: Sendable, Equatable {
    case session(String)
    case bearer(String)
    /// A Compass login token (``CompassTokens``).
    case compass(String)
    /// A REST API key (`x-sn-apikey`, ``APIKeys``).
    case apiKey(String)
    /// A client certificate, by its SHA-256 fingerprint (``ClientCertificates``).
    case certificate(String)
}
