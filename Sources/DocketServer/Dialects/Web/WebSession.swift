import Crypto
import DocketModel
import Foundation
import Hummingbird

/// The web UI's session cookie and CSRF tokens.
///
/// Signing in starts an ordinary docketd session (the one the APIs' `JSESSIONID` carries), held here in its own
/// cookie, `docket_session`: HttpOnly, SameSite=Strict, Secure when docketd speaks TLS. The APIs never read that
/// cookie, so a page elsewhere cannot make the browser use it against them. Every form that changes something
/// carries a token derived from the session (an HMAC under the server's signing key, the same on every instance
/// sharing a database); the sign-in form, which comes before any session, carries the value of a random
/// `docket_login` cookie instead (a double-submit token).
struct WebSessions: Sendable {
    static let cookie = "docket_session"
    static let loginCookie = "docket_login"

    /// The HMAC key, as bytes (swift-crypto's `SymmetricKey` is not `Sendable`).
    private let keyBytes: [UInt8]
    private var key: SymmetricKey { SymmetricKey(data: keyBytes) }
    /// Whether cookies are marked `Secure` (docketd serves TLS).
    let secure: Bool

    init(secret: [UInt8], secure: Bool) {
        // A key of its own: CSRF tokens are not Compass tokens.
        self.keyBytes = Array(HMAC<SHA256>.authenticationCode(for: Data("docket web csrf".utf8), using: SymmetricKey(data: secret)))
        self.secure = secure
    }

    /// A JSON value sealed for the browser to carry (a sign-in in progress): readable by every instance, not
    /// forgeable; under a key of its own.
    func seal(_ value: JSONValue) -> String {
        let body = Base64URL.encode(value.serialized())
        return body + "." + Base64URL.encode(Array(HMAC<SHA256>.authenticationCode(for: Data(("seal." + body).utf8), using: key)))
    }

    /// What ``seal(_:)`` sealed; nil for anything else.
    func unseal(_ text: String) -> JSONValue? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard text.utf8.count <= 8192, parts.count == 2, let code = Base64URL.decode(parts[1]),
            HMAC<SHA256>.isValidAuthenticationCode(code, authenticating: Data(("seal." + parts[0]).utf8), using: key),
            let body = Base64URL.decode(parts[0])
        else { return nil }
        return try? JSONValue.parse(body)
    }

    /// The cookie of a sign-in through a trusted provider, until it comes back (`SameSite=Lax`: the way back is a
    /// navigation from the provider's site).
    func singleSignOnCookie(_ value: String, maxAge: Int = 600) -> Cookie {
        Cookie(name: "docket_sso", value: value, maxAge: maxAge, path: "/app/sso", secure: secure, httpOnly: true, sameSite: .lax)
    }

    /// The CSRF token of a session.
    func csrf(for session: String) -> String {
        Base64URL.encode(Array(HMAC<SHA256>.authenticationCode(for: Data(session.utf8), using: key)))
    }

    func isValid(_ token: String, session: String) -> Bool {
        guard let code = Base64URL.decode(token) else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(code, authenticating: Data(session.utf8), using: key)
    }

    func sessionCookie(_ token: String) -> Cookie {
        Cookie(name: Self.cookie, value: token, path: "/", secure: secure, httpOnly: true, sameSite: .strict)
    }

    func endedSessionCookie() -> Cookie {
        Cookie(name: Self.cookie, value: "", maxAge: 0, path: "/", secure: secure, httpOnly: true, sameSite: .strict)
    }

    func loginCookie(_ value: String) -> Cookie {
        Cookie(name: Self.loginCookie, value: value, path: "/", secure: secure, httpOnly: true, sameSite: .strict)
    }

    /// Checks the form's CSRF token against the request's session (or, for the sign-in form, the login cookie).
    func verify(_ form: WebForm, request: Request, context: DocketRequestContext) throws {
        let token = form["csrf"] ?? ""
        if case .session(let session) = context.credential {
            guard isValid(token, session: session) else { throw WebError.csrf }
        } else {
            guard let expected = request.cookies[Self.loginCookie]?.value, !expected.isEmpty, token == expected else {
                throw WebError.csrf
            }
        }
    }
}

/// A refusal shown as a page: a heading, a sentence and the status.
struct WebError: Error {
    let status: HTTPResponse.Status
    let message: String
    var heading: String
    /// Seconds to wait before trying again (429, 503); a 503 without it is the database's wait.
    var retryAfter: String?

    init(_ status: HTTPResponse.Status, _ message: String, heading: String? = nil) {
        self.status = status
        self.message = message
        self.heading = heading ?? Self.heading(for: status)
    }

    static let csrf = WebError(
        .forbidden, "This form has expired or did not come from Docket. Go back, reload the page and try again.",
        heading: "Form expired"
    )

    static func heading(for status: HTTPResponse.Status) -> String {
        switch status.code {
        case 400, 422: return "That did not work"
        case 401: return "Please sign in"
        case 403: return "Not allowed"
        case 404: return "Not found"
        case 409: return "Changed by someone else"
        case 413: return "Too large"
        case 429: return "Too many attempts"
        case 503: return "Try again shortly"
        default: return "Something went wrong"
        }
    }

    /// An engine refusal in the web UI's words.
    init(_ error: EngineError) {
        switch error.code {
        case .notFound: self.init(.notFound, "This item does not exist, or you may not see it.")
        case .forbidden, .forbiddenQuery: self.init(.forbidden, "You may not do this. " + error.description)
        case .conflict: self.init(.conflict, "Someone else changed this item first. Reload it and try again.")
        case .quotaExceeded: self.init(.contentTooLarge, error.detail ?? error.message)
        case .invalidTable, .badRequest: self.init(.badRequest, error.detail ?? error.message)
        }
    }
}
