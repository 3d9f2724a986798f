#if canImport(AuthenticationServices)
import AuthenticationServices
import Foundation

/// The browser step of a sign-in on Apple platforms (RFC 8252 §6): the authorization request opens in
/// `ASWebAuthenticationSession`, the system's browser sheet that shares the browser's cookies (so a company sign-in
/// the person already made is reused) and hands back only the redirect to the app's own scheme.
///
/// ```swift
/// let signIn = WebAuthenticationSignIn(anchor: window)
/// let login = try await signIn.signIn(
///     issuer: URL(string: "https://docket.example.com/realms/docket")!,
///     clientID: "docket-mobile", redirectURI: "com.docket.app:/oauth2redirect")
/// try store.save(.openID(login), for: instance)
/// ```
///
/// Everything but the sheet itself (discovery, PKCE, `state` and `nonce`, the code exchange) is ``OpenIDClient``'s,
/// shared with the loopback redirect and the device grant that platforms without this sheet use.
@MainActor
public final class WebAuthenticationSignIn: NSObject, ASWebAuthenticationPresentationContextProviding {
    private let anchor: ASPresentationAnchor
    private let client: OpenIDClient
    /// Kept while the sheet is up: the system holds it only weakly.
    private var session: ASWebAuthenticationSession?

    /// A sign-in presented over `anchor` (the window the person is using).
    public init(anchor: ASPresentationAnchor, client: OpenIDClient = OpenIDClient()) {
        self.anchor = anchor
        self.client = client
    }

    /// The whole sign-in: discovery of `issuer`, the request with PKCE, the browser sheet, the code exchange.
    /// Returns the login to keep (through a ``CredentialStore``, never a password). Cancelling the sheet throws a
    /// ``DocketError`` whose `detail` is `cancelled`.
    public func signIn(
        issuer: URL, clientID: String, clientSecret: String? = nil, redirectURI: String, scope: String = "openid profile",
        loginHint: String? = nil, prefersEphemeralSession: Bool = false
    ) async throws -> OpenIDLogin {
        let configuration = try await client.discover(issuer: issuer)
        let request = try client.authorizationRequest(
            configuration, clientID: clientID, redirectURI: redirectURI, scope: scope, loginHint: loginHint
        )
        let callback = try await callback(for: request, prefersEphemeralSession: prefersEphemeralSession)
        let tokens = try await client.finish(request, callback: callback, configuration: configuration, clientID: clientID, clientSecret: clientSecret)
        return try OpenIDLogin(tokens: tokens, configuration: configuration, clientID: clientID, clientSecret: clientSecret)
    }

    /// Shows the request's URL in the browser sheet and returns the URL the provider sent the browser back to.
    public func callback(for request: AuthorizationRequest, prefersEphemeralSession: Bool = false) async throws -> URL {
        guard let scheme = URL(string: request.redirectURI)?.scheme, !scheme.isEmpty else {
            throw DocketError(kind: .invalidRequest, message: "the redirect URI \(request.redirectURI) has no scheme to return to")
        }
        // A loopback redirect (http) is for desktop apps listening on a port: the sheet returns to custom schemes.
        guard scheme != "http", scheme != "https" else {
            throw DocketError(kind: .invalidRequest, message: "the browser sheet returns to an app's own scheme, not to \(request.redirectURI)")
        }
        defer { session = nil }
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<URL, any Error>) in
            let session = ASWebAuthenticationSession(url: request.url, callbackURLScheme: scheme) { url, error in
                if let url {
                    continuation.resume(returning: url)
                } else if let error = error as? ASWebAuthenticationSessionError, error.code == .canceledLogin {
                    continuation.resume(throwing: DocketError(kind: .invalidRequest, message: "the sign-in was cancelled", detail: "cancelled"))
                } else {
                    continuation.resume(throwing: DocketError(
                        kind: .transport, message: "the sign-in sheet failed: \(error?.localizedDescription ?? "no answer")", underlying: error
                    ))
                }
            }
            session.presentationContextProvider = self
            session.prefersEphemeralWebBrowserSession = prefersEphemeralSession
            self.session = session
            if !session.start() {
                continuation.resume(throwing: DocketError(kind: .invalidRequest, message: "the sign-in sheet could not be shown"))
            }
        }
    }

    /// The system asks on the main thread (the protocol's requirement is not actor-isolated).
    public nonisolated func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor {
        MainActor.assumeIsolated { anchor }
    }
}
#endif
