import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The OpenID Connect provider's dialect, in Keycloak's URL layout: the realm at `/realms/{realm}` and, for
/// clients configured for older Keycloak, at `/auth/realms/{realm}`. Discovery, the JWK Set, the authorization
/// endpoint (its sign-in page is the web UI's), token, userinfo, revocation, introspection and logout. Errors are
/// OAuth's (`{"error", "error_description"}`, RFC 6749 §5.2; `WWW-Authenticate: Bearer` for userinfo, RFC 6750),
/// or an HTML page where the browser must not be sent back to an unverified client. The token logic is
/// ``OpenIDProvider``'s; nothing here decides who may do what.
struct OpenIDRoutes {
    typealias Context = DocketRequestContext

    let provider: OpenIDProvider
    let identity: Identity
    let configuration: Configuration
    /// docketd's VAPID public key, for the `web_push` variant of `mobile-services.json`.
    var pushPublicKey: String? = nil

    static let prefixes = ["/realms/:realm", "/auth/realms/:realm"]

    func mount() -> DialectMount {
        let router = Router(context: Context.self, options: .autoGenerateHeadEndpoints)
        router.add(middleware: MalformedRequestMiddleware())
        router.add(middleware: BodyLimitMiddleware(maxBodySize: 64 * 1024))
        router.add(middleware: OpenIDErrorMiddleware())
        for prefix in Self.prefixes {
            router.get(RouterPath(prefix + "/.well-known/openid-configuration")) { request, context in
                try realm(context)
                return Self.json(provider.discovery(issuer: try issuer(request)))
            }
            let endpoints = prefix + "/protocol/openid-connect"
            router.get(RouterPath(endpoints + "/certs")) { _, context in
                try realm(context)
                do {
                    var response = Self.json(try await provider.keys.publishedKeys())
                    response.headers[.cacheControl] = "max-age=60"
                    return response
                } catch {
                    throw OpenIDProvider.Failure.unavailable
                }
            }
            router.get(RouterPath(endpoints + "/auth")) { request, context in
                try realm(context)
                return try await authorize(request, context: context)
            }
            router.post(RouterPath(endpoints + "/token")) { request, context in
                try realm(context)
                let form = try await Self.form(request)
                let answer = try await provider.token(
                    form: form, basic: request.headers.basic.map { (id: $0.username, secret: $0.password) }, issuer: try issuer(request),
                    identity: identity, address: context.clientAddress
                )
                return Self.json(answer)
            }
            for method in [HTTPRequest.Method.get, .post] {
                router.on(RouterPath(endpoints + "/userinfo"), method: method) { request, context in
                    try realm(context)
                    return try await userInfo(request)
                }
                router.on(RouterPath(endpoints + "/logout"), method: method) { request, context in
                    try realm(context)
                    return try await logout(request)
                }
            }
            router.post(RouterPath(endpoints + "/auth/device")) { request, context in
                try realm(context)
                let form = try await Self.form(request)
                return Self.json(try await provider.deviceAuthorization(
                    form: form, basic: request.headers.basic.map { (id: $0.username, secret: $0.password) }, issuer: try issuer(request)
                ))
            }
            // The device grant's verification page is the web UI's (signed in, with its CSRF protection).
            router.get(RouterPath(prefix + "/device")) { request, context in
                try realm(context)
                let code = request.uri.queryParameters["user_code"].map { "?user_code=" + Self.escape(String($0.prefix(32))) } ?? ""
                return Response(status: .seeOther, headers: [.location: "/app/device" + code, .cacheControl: "no-store"])
            }
            router.post(RouterPath(endpoints + "/revoke")) { request, context in
                try realm(context)
                let form = try await Self.form(request)
                let client = try await provider.authenticateClient(form: form, basic: request.headers.basic.map { (id: $0.username, secret: $0.password) })
                guard let token = form["token"], !token.isEmpty else { throw OpenIDProvider.Failure.invalidRequest("token is missing.") }
                try await provider.revoke(token, client: client)
                return Response(status: .ok, headers: [.cacheControl: "no-store"])
            }
            router.post(RouterPath(endpoints + "/token/introspect")) { request, context in
                try realm(context)
                let form = try await Self.form(request)
                let client = try await provider.authenticateClient(form: form, basic: request.headers.basic.map { (id: $0.username, secret: $0.password) })
                guard !client.isPublic else { throw OpenIDProvider.Failure.invalidClient("Public clients may not introspect tokens.") }
                guard let token = form["token"], !token.isEmpty else { throw OpenIDProvider.Failure.invalidRequest("token is missing.") }
                return Self.json(try await provider.introspect(token, client: client))
            }
        }
        // The AeroGear apps' configuration of this server, for a public client (`?client_id=`, by default the
        // DataSync showcase's).
        router.get("/mobile-services.json") { request, _ in
            let id = request.uri.queryParameters["client_id"].map(String.init) ?? "datasync-starter-client"
            let client = try await provider.client(id: id)
            guard client.isPublic else { throw OpenIDProvider.Failure.invalidClient("Only a public client's configuration is published.") }
            let variants = try await MobileServices.variants(of: client.clientID, store: provider.directory.store)
            return Self.json(MobileServices.document(
                base: try base(request), realm: provider.realm, clientID: client.clientID, push: variants, appServerKey: pushPublicKey
            ))
        }
        return DialectMount(name: "oidc", prefix: "/realms", responder: router.buildResponder()) { path in
            path.hasPrefix("/realms/") || path.hasPrefix("/auth/realms/") || path == "/mobile-services.json"
        }
    }

    /// Refuses a realm other than the configured one, as Keycloak does.
    private func realm(_ context: Context) throws {
        guard context.parameters.get("realm") == provider.realm else {
            throw OpenIDProvider.Failure(error: "Realm does not exist", description: "There is no such realm here.", status: 404)
        }
    }

    /// The issuer this request addresses: under the configured public URL (behind a proxy), else the scheme and
    /// host the request came to; `/auth` kept when the request used the legacy prefix.
    func issuer(_ request: Request) throws -> String {
        var base = try base(request)
        if request.uri.path.hasPrefix("/auth/") { base += "/auth" }
        return provider.issuer(base: base)
    }

    /// The server's base URL for this request: the configured public URL, else the scheme and host it came to.
    func base(_ request: Request) throws -> String { try Self.base(request, configuration: configuration) }

    static func base(_ request: Request, configuration: Configuration) throws -> String {
        var base: String
        if let publicURL = configuration.publicURL, !publicURL.isEmpty {
            base = publicURL
            while base.hasSuffix("/") { base.removeLast() }
        } else {
            let host = request.head.authority ?? ""
            guard !host.isEmpty, host.utf8.count <= 255,
                host.utf8.allSatisfy({ byte in
                    (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                        || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ":")
                        || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "]")
                })
            else { throw OpenIDProvider.Failure.invalidRequest("The request's Host is not a host name.") }
            base = (configuration.usesTLS ? "https://" : "http://") + host
        }
        return base
    }

    // MARK: Authorization endpoint

    @Sendable func authorize(_ request: Request, context: Context) async throws -> Response {
        var query: [String: String] = [:]
        for (name, value) in FormQuery.parse(request.uri.query) {
            guard query[name] == nil else { return Self.page(.badRequest, "The sign-in request names \(name) twice.") }
            query[name] = value
        }
        // Until the client and its redirect URI are known good, nothing is sent back to it: a page says what is wrong.
        let client: OAuthDirectory.Client
        do {
            client = try await provider.client(id: query["client_id"] ?? "")
        } catch {
            if error.status == 503 { return Self.page(.serviceUnavailable, "Sign-in cannot be checked right now. Try again in a moment.") }
            return Self.page(.badRequest, "The app that sent you here is not known to Docket (client_id).")
        }
        guard let redirect = query["redirect_uri"], OpenIDProvider.accepts(redirect: redirect, registered: client.redirectURIs) else {
            return Self.page(.badRequest, "The app that sent you here asked to return to an address it did not register (redirect_uri).")
        }
        let state = query["state"]
        func refuse(_ error: String, _ description: String) -> Response {
            var parameters = [("error", error), ("error_description", description)]
            if let state { parameters.append(("state", state)) }
            return Self.redirect(redirect, parameters)
        }
        guard query["response_type"] == "code" else { return refuse("unsupported_response_type", "Only response_type=code is supported.") }
        guard client.grantTypes.contains("authorization_code") else {
            return refuse("unauthorized_client", "This client may not use the authorization code grant.")
        }
        let challenge = query["code_challenge"] ?? ""
        if !challenge.isEmpty {
            guard query["code_challenge_method"] == "S256" else { return refuse("invalid_request", "code_challenge_method must be S256.") }
            guard (43...128).contains(challenge.utf8.count) else { return refuse("invalid_request", "code_challenge is malformed.") }
        } else if client.isPublic {
            return refuse("invalid_request", "A public client must use PKCE (code_challenge with S256).")
        }
        let nonce = query["nonce"] ?? ""
        guard nonce.utf8.count <= 512, (state ?? "").utf8.count <= 2048 else { return refuse("invalid_request", "state or nonce is too long.") }
        let prompt = Set((query["prompt"] ?? "").split(separator: " ").map(String.init))
        var caller: Caller?
        var signIn: UserDirectory.CredentialProof.Parent?
        if !prompt.contains("login"), let token = request.cookies[WebSessions.cookie]?.value, !token.isEmpty, token.count <= 128 {
            signIn = .session(hash: SessionStore.hash(token))
            do {
                caller = try await identity.session(token)
            } catch .sessionEnded {
                caller = nil
            } catch {
                return refuse("temporarily_unavailable", "Sign-in cannot be checked right now.")
            }
        }
        // Not signed in (or the sign-in ended while this request was answered): the sign-in page, or login_required.
        func signInFirst() -> Response {
            if prompt.contains("none") { return refuse("login_required", "The user is not signed in.") }
            // The web UI's sign-in page, coming back here (without prompt=login, which it has then honoured).
            var again = FormQuery.parse(request.uri.query).filter { $0.0 != "prompt" }
            again.sort { $0.0 < $1.0 }
            let back = request.uri.path + "?" + again.map { Self.escape($0.0) + "=" + Self.escape($0.1) }.joined(separator: "&")
            var target = "/?next=" + Self.escape(back)
            if prompt.contains("login") { target += "&force=1" }
            if let hint = query["login_hint"], !hint.isEmpty, hint.utf8.count <= 256 { target += "&login_hint=" + Self.escape(hint) }
            return Response(status: .seeOther, headers: [.location: target, .cacheControl: "no-store"])
        }
        guard let caller else { return signInFirst() }
        guard let granted = try await provider.authorize(
            .init(client: client, redirectURI: redirect, scope: OpenIDProvider.grantedScope(query["scope"]), nonce: nonce, challenge: challenge),
            caller: caller, signIn: signIn, issuer: try issuer(request)
        ) else { return signInFirst() }
        var parameters = [("code", granted.code)]
        if let state { parameters.append(("state", state)) }
        parameters.append(("session_state", granted.sid))
        parameters.append(("iss", try issuer(request)))
        return Self.redirect(redirect, parameters)
    }

    // MARK: Userinfo and logout

    @Sendable func userInfo(_ request: Request) async throws -> Response {
        var token = request.headers.bearer?.token
        // RFC 6750 §2.2: the token may be a form field of a POST; a body of another type carries none, and a form
        // that cannot be read (too large, a field twice) is the caller's error, said as such.
        if token == nil, request.method == .post,
           (request.headers[.contentType] ?? "").lowercased().hasPrefix("application/x-www-form-urlencoded") {
            token = try await Self.form(request)["access_token"]
        }
        guard let token, !token.isEmpty else { return Self.bearerRefusal(nil, "The request has no access token.") }
        let found: (claims: OpenIDProvider.AccessClaims, userID: String)?
        do { found = try await provider.access(token) } catch { throw OpenIDProvider.Failure.unavailable }
        guard let found else { return Self.bearerRefusal("invalid_token", "The access token is not active.") }
        guard found.claims.scope.split(separator: " ").contains("openid") else {
            var response = Self.bearerRefusal("insufficient_scope", "The access token was not issued for openid.")
            response.status = .forbidden
            return response
        }
        return Self.json(OpenIDProvider.userInfo(found.claims))
    }

    @Sendable func logout(_ request: Request) async throws -> Response {
        var parameters: [String: String] = [:]
        for (name, value) in FormQuery.parse(request.uri.query) where parameters[name] == nil { parameters[name] = value }
        if request.method == .post {
            for (name, value) in try await Self.form(request) where parameters[name] == nil { parameters[name] = value }
            // A back-channel logout: a client ends the session of its refresh token (answered 204).
            if let refresh = parameters["refresh_token"] {
                let client = try await provider.authenticateClient(
                    form: parameters, basic: request.headers.basic.map { (id: $0.username, secret: $0.password) }
                )
                guard try await provider.logout(refreshToken: refresh, client: client) else {
                    throw OpenIDProvider.Failure.invalidGrant("The refresh token is not active.")
                }
                return Response(status: .noContent, headers: [.cacheControl: "no-store"])
            }
        }
        guard let hint = parameters["id_token_hint"], !hint.isEmpty else {
            return Self.page(.badRequest, "The app did not say which sign-in to end (id_token_hint). Sign out in the app, or in Docket's web UI.")
        }
        let claims: OpenIDProvider.IDClaims?
        do { claims = try await provider.idTokenHint(hint) } catch { throw OpenIDProvider.Failure.unavailable }
        guard let claims else { return Self.page(.badRequest, "The sign-in to end (id_token_hint) is not one Docket issued.") }
        if let named = parameters["client_id"], named != claims.aud {
            return Self.page(.badRequest, "The app named (client_id) is not the one the sign-in was for.")
        }
        var target: String?
        if let uri = parameters["post_logout_redirect_uri"], !uri.isEmpty {
            let client: OAuthDirectory.Client
            do { client = try await provider.client(id: claims.aud) } catch {
                return Self.page(.badRequest, "The app that sent you here is no longer known to Docket.")
            }
            guard OpenIDProvider.accepts(redirect: uri, registered: client.postLogoutRedirectURIs) else {
                return Self.page(.badRequest, "The app asked to return to an address it did not register (post_logout_redirect_uri).")
            }
            target = uri
        }
        do { try await provider.end(sid: claims.sid) } catch { throw OpenIDProvider.Failure.unavailable }
        guard let target else { return Self.page(.ok, "You are signed out of the app.", heading: "Signed out") }
        return Self.redirect(target, parameters["state"].map { [("state", $0)] } ?? [])
    }

    // MARK: Shapes

    /// The form of a POST: `application/x-www-form-urlencoded` only, each parameter at most once (RFC 6749 §3.2).
    static func form(_ request: Request) async throws -> [String: String] {
        guard (request.headers[.contentType] ?? "").lowercased().hasPrefix("application/x-www-form-urlencoded") else {
            throw OpenIDProvider.Failure.invalidRequest("The request must be application/x-www-form-urlencoded.")
        }
        let body: ByteBuffer
        do { body = try await request.body.collect(upTo: 64 * 1024) } catch {
            throw OpenIDProvider.Failure(error: "invalid_request", description: "The request is too large.", status: 413)
        }
        var form: [String: String] = [:]
        for (name, value) in FormQuery.parse(String(buffer: body)) {
            guard form[name] == nil else { throw OpenIDProvider.Failure.invalidRequest("\(name.prefix(40)) is given more than once.") }
            form[name] = value
        }
        return form
    }

    static func json(_ body: JSONValue) -> Response {
        var response = Response.json(body, status: .ok)
        response.headers[.cacheControl] = "no-store"
        response.headers[.pragma] = "no-cache"
        return response
    }

    static func bearerRefusal(_ error: String?, _ description: String) -> Response {
        var challenge = #"Bearer realm="docket""#
        if let error { challenge += #", error=""# + error + #"", error_description=""# + description + #"""# }
        var response = Response.json(
            .object(["error": .string(error ?? "invalid_request"), "error_description": .string(description)]), status: .unauthorized
        )
        response.headers[.wwwAuthenticate] = challenge
        response.headers[.cacheControl] = "no-store"
        return response
    }

    /// A redirect to a client's URI with parameters added to its query.
    static func redirect(_ uri: String, _ parameters: [(String, String)]) -> Response {
        let query = parameters.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
        let location = query.isEmpty ? uri : uri + (uri.contains("?") ? "&" : "?") + query
        return Response(status: .found, headers: [.location: location, .cacheControl: "no-store"])
    }

    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? ""
    }

    /// A small page for the browser where no redirect is safe.
    static func page(_ status: HTTPResponse.Status, _ message: String, heading: String = "Sign-in problem") -> Response {
        func html(_ text: String) -> String {
            text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
                .replacingOccurrences(of: "\"", with: "&quot;")
        }
        var response = WebUI.html(
            "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><link rel=\"icon\" href=\"/app/assets/icon.svg\" type=\"image/svg+xml\"><title>Docket — \(html(heading))</title><h1>\(html(heading))</h1><p>\(html(message))</p><p><a href=\"/\">Docket</a></p></html>",
            status: status
        )
        if status == .serviceUnavailable { response.headers[.retryAfter] = StorageUnavailable.retryAfter }
        return response
    }
}

/// OAuth's error envelope for every failure of the dialect: an ``OpenIDProvider/Failure`` as itself, anything
/// else (a storage failure, a body too large) as the matching OAuth error, never a 500 page of another dialect.
struct OpenIDErrorMiddleware: RouterMiddleware {
    typealias Context = DocketRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let failure as OpenIDProvider.Failure {
            return Self.response(failure)
        } catch let error as HTTPError where error.status == .notFound || error.status == .methodNotAllowed {
            return Self.response(.init(error: "invalid_request", description: "There is no such endpoint.", status: Int(error.status.code)))
        } catch let error as HTTPError where error.status == .contentTooLarge {
            return Self.response(.init(error: "invalid_request", description: "The request is too large.", status: 413))
        } catch {
            context.logger.error("OpenID request failed", metadata: ["error": "\(String(reflecting: type(of: error)))"])
            return Self.response(.unavailable)
        }
    }

    static func response(_ failure: OpenIDProvider.Failure) -> Response {
        var response = Response.json(
            .object(["error": .string(failure.error), "error_description": .string(failure.description)]),
            status: HTTPResponse.Status(code: failure.status)
        )
        response.headers[.cacheControl] = "no-store"
        response.headers[.pragma] = "no-cache"
        if let wait = failure.retryAfter { response.headers[.retryAfter] = wait }
        if failure.error == "invalid_client" { response.headers[.wwwAuthenticate] = #"Basic realm="docket""# }
        return response
    }
}
