import Crypto
import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1

/// Docket in the browser: the web UI's dialect. `GET /` is the sign-in page; everything else lives below `/app`
/// (my work, items, forms, the live feed, assets). Its own router, middleware (authentication by the
/// `docket_session` cookie only) and errors (HTML pages). Every screen is a view over the engine: reads, writes,
/// workflow and access rules go through ``RecordStore`` as they do for the APIs.
struct WebAPI {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let configuration: Configuration
    let identity: Identity
    let sessions: WebSessions
    let ui: WebUI?
    let events: EventStreamController
    let uploads: UploadGate
    /// The OpenID provider, whose device grant this UI confirms (`/app/device`).
    var openID: OpenIDProvider? = nil
    /// Trusted outside providers; those with a client for docketd are offered on the sign-in page.
    var federation: Federation? = nil
    /// Push to browsers: docketd's VAPID key and the device registry (the notification pages need neither).
    var push: (vapid: VAPIDKey, subscriptions: PushSubscriptions)? = nil

    /// The tables "New …" offers, in this order, where they exist and the caller may create them.
    static let creatableTables = ["incident", "defect", "problem", "change_request"]

    func mount() -> DialectMount {
        let pages = self.pages
        let router = Router(context: Context.self, options: .autoGenerateHeadEndpoints)
        router.add(middleware: MalformedRequestMiddleware())
        router.add(middleware: BodyLimitMiddleware(maxBodySize: configuration.maxBodySize))
        router.add(middleware: WebMiddleware(pages: pages, identity: identity))
        router.get("/") { request, context in try await signInPage(request, context: context) }
        router.get("/app") { _, _ in Self.redirect("/app/work") }
        router.post("/app/login") { request, context in try await signIn(request, context: context) }
        router.post("/app/logout") { request, context in try await signOut(request, context: context) }
        router.get("/app/assets/:name") { request, context in
            guard let ui else { throw WebError(.notFound, "There is no such file.") }
            return try ui.asset(request, name: context.parameters.get("name") ?? "")
        }
        router.get("/app/events") { request, context in try await events.events(request, context: context) }
        router.get("/app/sso/callback") { request, context in try await finishSingleSignOn(request, context: context) }
        router.get("/app/sso/:index") { request, context in try await startSingleSignOn(request, context: context) }
        router.get("/app/device") { request, context in try await devicePage(request, context: context) }
        router.post("/app/device") { request, context in try await decideDevice(request, context: context) }
        // ServiceNow's form and list pages (the My Work API's `snowui` links, pysnc's get_link): the web UI's.
        let store = self.store
        router.get("/:page") { request, context in try Self.classicPage(request, context: context, catalog: store.catalog) }
        WebWork(store: store, pages: pages).add(to: router)
        WebLists(store: store, pages: pages).add(to: router)
        WebDashboard(store: store, pages: pages).add(to: router)
        WebItems(store: store, pages: pages, configuration: configuration).add(to: router)
        WebEdits(store: store, pages: pages, configuration: configuration, uploads: uploads).add(to: router)
        if let push {
            WebNotifications(store: store, pages: pages, sessions: sessions, vapid: push.vapid, subscriptions: push.subscriptions).add(to: router)
        }
        return DialectMount(name: "web", prefix: "/app", responder: router.buildResponder()) { path in
            path == "/" || path == "/app" || path.hasPrefix("/app/") || Self.classicTable(path, catalog: store.catalog) != nil
        }
    }

    /// The table of a ServiceNow page path: `/incident.do` (a record's form) or `/incident_list.do` (a list); nil for
    /// anything else (`/logout.do`, `/oauth_token.do` are no tables).
    static func classicTable(_ path: String, catalog: SchemaCatalog) -> (table: String, isList: Bool)? {
        guard path.hasPrefix("/"), path.hasSuffix(".do"), path.count < 120 else { return nil }
        var name = String(path.dropFirst().dropLast(3))
        guard !name.contains("/") else { return nil }
        let isList = name.hasSuffix("_list") && catalog.table(name) == nil
        if isList { name.removeLast("_list".count) }
        guard catalog.table(name) != nil else { return nil }
        return (name, isList)
    }

    /// `/incident.do?sys_id=…` opens the item, `/incident.do` without one the form for a new incident, and
    /// `/incident_list.do` My work.
    static func classicPage(_ request: Request, context: Context, catalog: SchemaCatalog) throws -> Response {
        guard let page = classicTable(request.uri.path, catalog: catalog) else { throw WebError(.notFound, "There is no such page.") }
        if page.isList { return redirect("/app/work") }
        let sysID = request.uri.queryParameters["sys_id"].map(String.init) ?? ""
        guard !sysID.isEmpty, sysID != "-1" else { return redirect("/app/new/\(page.table)") }
        guard SysID.isValid(sysID) else { throw WebError(.notFound, "This item does not exist, or you may not see it.") }
        return redirect("/app/item/\(page.table)/\(sysID)")
    }

    var pages: WebPages { WebPages(store: store, sessions: sessions, ui: ui) }

    static func redirect(_ location: String, cookies: [Cookie] = []) -> Response {
        var response = Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
        for cookie in cookies { response.setCookie(cookie) }
        return response
    }

    /// A local path to go to after signing in (never another site): a page of the web UI, or the OpenID provider's
    /// authorization endpoint (an app's sign-in that sent the browser here).
    static func safeNext(_ text: String?) -> String {
        guard let text, text.hasPrefix("/app/") || isAuthorization(text), !text.hasPrefix("//"), !text.contains("\\"), text.count < 4000 else {
            return "/app/work"
        }
        return text
    }

    /// Whether a local path is the OpenID provider's authorization endpoint (`/realms/{realm}/protocol/openid-connect/auth?…`).
    static func isAuthorization(_ path: String) -> Bool {
        let route = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        let parts = route.split(separator: "/", omittingEmptySubsequences: false)
        let rest = parts.first == "" && parts.dropFirst().first == "auth" ? Array(parts.dropFirst(2)) : Array(parts.dropFirst())
        return rest.count == 5 && rest[0] == "realms" && rest[2] == "protocol" && rest[3] == "openid-connect" && rest[4] == "auth"
    }

    // MARK: Signing in and out

    @Sendable func signInPage(_ request: Request, context: Context) async throws -> Response {
        let next = request.uri.queryParameters["next"].map(String.init)
        // `force`: an app asked for the password again (OpenID's prompt=login), whoever is signed in here.
        if context.caller != nil, request.uri.queryParameters["force"] != "1" { return Self.redirect(Self.safeNext(next)) }
        let hint = request.uri.queryParameters["login_hint"].map { String($0.prefix(256)) } ?? ""
        return signInForm(request, error: nil, userName: hint, next: next, status: .ok)
    }

    private func signInForm(_ request: Request, error: String?, userName: String, next: String?, status: HTTPResponse.Status, headers: HTTPFields = [:]) -> Response {
        let token = request.cookies[WebSessions.loginCookie]?.value ?? SysID.generate()
        var values: [String: Any] = ["title": "Sign in", "loginToken": token, "next": Self.safeNext(next), "userNameValue": userName]
        if let error { values["error"] = error }
        let providers = federation?.issuers.issuers.enumerated().filter { $0.element.clientID != nil } ?? []
        if !providers.isEmpty {
            let back = OpenIDRoutes.escape(Self.safeNext(next))
            values["providers"] = providers.map { ["href": "/app/sso/\($0.offset)?next=" + back, "label": $0.element.label] }
        }
        var response = pages.render("login", values, status: status)
        for field in headers { response.headers.append(field) }
        // Signing in for an app ends in a redirect to the app, which the page's form-action must allow (browsers
        // check it on every redirect after a form is sent); the provider checks the address before it redirects.
        if let next, Self.isAuthorization(Self.safeNext(next)), let source = Self.formActionSource(ofAuthorization: next) {
            WebUI.securityHeaders(&response.headers)
            response.headers[.contentSecurityPolicy] = response.headers[.contentSecurityPolicy]?
                .replacingOccurrences(of: "form-action 'self'", with: "form-action 'self' " + source)
        }
        if request.cookies[WebSessions.loginCookie]?.value != token { response.setCookie(sessions.loginCookie(token)) }
        return response
    }

    /// The CSP source of an authorization request's `redirect_uri`: its origin (`https://app.example:8443`), or its
    /// scheme for an app's own scheme (`com.example.app:`); nil when it has none that CSP can say.
    static func formActionSource(ofAuthorization path: String) -> String? {
        guard let query = path.split(separator: "?", maxSplits: 1).dropFirst().first,
            let redirect = FormQuery.parse(String(query)).first(where: { $0.0 == "redirect_uri" })?.1,
            let parsed = URLComponents(string: redirect), let scheme = parsed.scheme?.lowercased(),
            scheme.unicodeScalars.allSatisfy({ CharacterSet.alphanumerics.contains($0) || $0 == "." || $0 == "-" || $0 == "+" })
        else { return nil }
        guard scheme == "http" || scheme == "https" else { return scheme + ":" }
        guard let host = parsed.host, !host.isEmpty,
            host.unicodeScalars.allSatisfy({ CharacterSet.alphanumerics.contains($0) || ".-[]:".unicodeScalars.contains($0) })
        else { return nil }
        return scheme + "://" + host + (parsed.port.map { ":\($0)" } ?? "")
    }

    @Sendable func signIn(_ request: Request, context: Context) async throws -> Response {
        var context = context
        // The sign-in form is checked against the login cookie, whatever session the browser holds.
        context.credential = nil
        let form = try await WebForm.read(request, context: context, sessions: sessions)
        let userName = form.text("user_name") ?? ""
        let password = form["password"] ?? ""
        let next = form["next"]
        guard !userName.isEmpty, !password.isEmpty else {
            return signInForm(request, error: "Enter your user name and password.", userName: userName, next: next, status: .badRequest)
        }
        do {
            let token = try await identity.signIn(userName: String(userName.prefix(256)), password: password, address: context.clientAddress)
            return Self.redirect(Self.safeNext(next), cookies: [sessions.sessionCookie(token)])
        } catch {
            switch error {
            case .missing, .rejected, .invalidToken, .sessionEnded:
                let locked = await identity.authenticator.isLockedOut(userName: userName, password: password)
                return signInForm(
                    request,
                    error: locked
                        ? "This account is locked. Ask an administrator to unlock it."
                        : "The user name or password is not right. Check them and try again.",
                    userName: userName, next: next, status: locked ? .forbidden : .unauthorized
                )
            case .throttled(let wait):
                let seconds = LoginFailure.seconds(wait)
                return signInForm(
                    request, error: "Too many failed attempts. Wait \(seconds) second\(seconds == 1 ? "" : "s") and try again.",
                    userName: userName, next: next, status: .tooManyRequests, headers: [.retryAfter: String(seconds)]
                )
            case .busy, .unavailable:
                return signInForm(
                    request, error: "Sign-in cannot be checked right now. Try again in a moment.", userName: userName,
                    next: next, status: .serviceUnavailable, headers: [.retryAfter: "2"]
                )
            }
        }
    }

    // MARK: Signing in through a trusted provider (authorization code + PKCE, docketd as the client)

    @Sendable func startSingleSignOn(_ request: Request, context: Context) async throws -> Response {
        guard let federation, let index = context.parameters.get("index").flatMap(Int.init), federation.issuers.issuers.indices.contains(index),
            let clientID = federation.issuers.issuers[index].clientID
        else { throw WebError(.notFound, "There is no such way to sign in.") }
        let issuer = federation.issuers.issuers[index]
        let endpoints: (authorization: String, token: String)
        do {
            endpoints = try await federation.issuers.endpoints(of: issuer)
        } catch {
            var refusal = WebError(.serviceUnavailable, "\(issuer.label) cannot be reached right now. Try again in a moment, or sign in with your password.")
            refusal.retryAfter = "5"
            throw refusal
        }
        let state = Base64URL.random(bytes: 16)
        let nonce = Base64URL.random(bytes: 16)
        let verifier = Base64URL.random(bytes: 32)
        let challenge = Base64URL.encode(Array(SHA256.hash(data: Data(verifier.utf8))))
        let next = Self.safeNext(request.uri.queryParameters["next"].map(String.init))
        let pending = JSONValue.object([
            "i": .integer(index), "s": .string(state), "n": .string(nonce), "v": .string(verifier), "next": .string(next),
            "exp": .integer(SessionStore.now() + 600),
        ])
        let query = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", try callback(request)), ("scope", "openid profile email"),
            ("state", state), ("nonce", nonce), ("code_challenge", challenge), ("code_challenge_method", "S256"),
        ].map { OpenIDRoutes.escape($0.0) + "=" + OpenIDRoutes.escape($0.1) }.joined(separator: "&")
        var response = Response(
            status: .seeOther,
            headers: [.location: endpoints.authorization + (endpoints.authorization.contains("?") ? "&" : "?") + query, .cacheControl: "no-store"]
        )
        response.setCookie(sessions.singleSignOnCookie(sessions.seal(pending)))
        return response
    }

    @Sendable func finishSingleSignOn(_ request: Request, context: Context) async throws -> Response {
        let parameters = request.uri.queryParameters
        guard let federation, let sealed = request.cookies["docket_sso"]?.value, let pending = sessions.unseal(sealed),
            let index = pending["i"]?.intValue, federation.issuers.issuers.indices.contains(index),
            let state = pending["s"]?.stringValue, parameters["state"].map(String.init) == state,
            let expires = pending["exp"]?.intValue, expires > SessionStore.now(),
            let nonce = pending["n"]?.stringValue, let verifier = pending["v"]?.stringValue
        else {
            return signInForm(request, error: "That sign-in did not start here, or took too long. Try again.", userName: "", next: nil, status: .badRequest)
        }
        let issuer = federation.issuers.issuers[index]
        let next = Self.safeNext(pending["next"]?.stringValue)
        if let refused = parameters["error"] {
            return signInForm(request, error: "\(issuer.label) did not sign you in (\(refused.prefix(60))).", userName: "", next: next, status: .unauthorized)
        }
        guard let code = parameters["code"], !code.isEmpty, code.count <= 2048 else {
            return signInForm(request, error: "\(issuer.label) sent no sign-in code. Try again.", userName: "", next: next, status: .badRequest)
        }
        let idToken: String
        do {
            guard let exchanged = try await federation.issuers.exchange(code: String(code), verifier: verifier, redirectURI: try callback(request), issuer: issuer)
            else {
                return signInForm(request, error: "\(issuer.label) did not confirm the sign-in. Try again.", userName: "", next: next, status: .unauthorized)
            }
            idToken = exchanged
        } catch let error as TrustedIssuers.Unreachable {
            context.logger.warning("Single sign-on failed", metadata: ["issuer": "\(issuer.issuer)", "reason": "\(error.reason)"])
            return signInForm(request, error: "\(issuer.label) cannot be reached right now. Try again in a moment.", userName: "", next: next, status: .serviceUnavailable, headers: [.retryAfter: "5"])
        }
        let signedIn: (caller: Caller, session: String)?
        do {
            signedIn = try await identity.signIn(idToken: idToken, issuer: issuer, nonce: nonce)
        } catch {
            context.logger.warning("Single sign-on could not be checked", metadata: ["issuer": "\(issuer.issuer)", "refusal": "\(error)"])
            return signInForm(request, error: "\(issuer.label) cannot be reached right now. Try again in a moment.", userName: "", next: next, status: .serviceUnavailable, headers: [.retryAfter: "5"])
        }
        guard let token = signedIn?.session else {
            return signInForm(
                request, error: "Your \(issuer.label) account has no active Docket account. Ask an administrator.", userName: "", next: next,
                status: .forbidden
            )
        }
        // The session cookie is SameSite=Strict: a navigation that began at the provider's site would not carry it,
        // so this page moves on from here.
        // `next` is a local path (``safeNext(_:)``); escaped for the attribute all the same.
        let target = next.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
        var response = WebUI.html(
            "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url=\(target)\"><link rel=\"icon\" href=\"/app/assets/icon.svg\" type=\"image/svg+xml\"><title>Docket</title><p>Signed in. <a href=\"\(target)\">Continue</a></p></html>"
        )
        response.setCookie(sessions.sessionCookie(token))
        response.setCookie(sessions.singleSignOnCookie("", maxAge: 0))
        return response
    }

    /// Where a trusted provider sends the browser back: `{base}/app/sso/callback`.
    private func callback(_ request: Request) throws -> String {
        try OpenIDRoutes.base(request, configuration: configuration) + "/app/sso/callback"
    }

    // MARK: Confirming a device's sign-in (OpenID's device grant)

    @Sendable func devicePage(_ request: Request, context: Context) async throws -> Response {
        let typed = request.uri.queryParameters["user_code"].map { String($0.prefix(32)) } ?? ""
        var values: [String: Any] = ["title": "Sign in a device", "heading": "Sign in a device", "ask": true, "userCode": typed]
        if !typed.isEmpty, let openID {
            if let client = try await openID.pendingDevice(userCode: typed) {
                values["clientName"] = client
            } else {
                values["error"] = "This code is not valid, or it expired. Check it, or start the sign-in on the device again."
            }
        }
        return pages.page("device", values, context: context)
    }

    @Sendable func decideDevice(_ request: Request, context: Context) async throws -> Response {
        let form = try await WebForm.read(request, context: context, sessions: sessions)
        let caller = try context.requireCaller()
        guard let openID else { throw WebError(.notFound, "Device sign-in is not offered here.") }
        let typed = String((form["user_code"] ?? "").prefix(32))
        let approve = form["decision"] == "allow"
        // The approval is recorded only while this web session lasts.
        let signIn = request.cookies[WebSessions.cookie].map {
            UserDirectory.CredentialProof.Parent.session(hash: SessionStore.hash($0.value))
        }
        let decision = try await openID.decideDevice(userCode: typed, caller: caller, approve: approve, signIn: signIn)
        if decision == .signedOut { throw WebError(.unauthorized, "Your sign-in has ended. Sign in again, then enter the code.") }
        if case .tooManyAttempts(let wait) = decision {
            var refusal = WebError(.tooManyRequests, "Too many codes that were not right. Wait \(wait) seconds and try again.")
            refusal.retryAfter = String(wait)
            throw refusal
        }
        guard decision == .decided else {
            return pages.page(
                "device",
                [
                    "title": "Sign in a device", "heading": "Sign in a device", "ask": true, "userCode": typed,
                    "error": "This code is not valid, or it expired. Check it, or start the sign-in on the device again.",
                ],
                context: context, status: .badRequest
            )
        }
        return pages.page(
            "device",
            approve
                ? ["title": "Device signed in", "heading": "Device signed in", "message": "You may go back to your device: it is signed in as \(caller.userName)."]
                : ["title": "Sign-in refused", "heading": "Sign-in refused", "message": "The device was not signed in."],
            context: context
        )
    }

    @Sendable func signOut(_ request: Request, context: Context) async throws -> Response {
        _ = try await WebForm.read(request, context: context, sessions: sessions)
        if case .session(let token) = context.credential { try await identity.authenticator.endSession(token) }
        return Self.redirect("/", cookies: [sessions.endedSessionCookie()])
    }
}

/// What every page shares: the layout's values, rendering, and error pages.
struct WebPages: Sendable {
    let store: RecordStore
    let sessions: WebSessions
    let ui: WebUI?

    /// The layout's values for a signed-in caller: who, the CSRF token, what they may create.
    func common(_ context: DocketRequestContext) -> [String: Any] {
        guard let caller = context.caller, case .session(let session) = context.credential else { return [:] }
        let creatable: [[String: String]] = WebAPI.creatableTables.compactMap { name in
            guard store.mayCreate(in: name, caller: caller), let table = store.catalog.table(name) else { return nil }
            return ["table": name, "label": table.label.lowercased()]
        }
        return [
            "user": ["userName": caller.userName, "displayName": caller.displayName.isEmpty ? caller.userName : caller.displayName],
            "csrf": sessions.csrf(for: session), "creatable": creatable,
        ]
    }

    func render(_ template: String, _ values: [String: Any], status: HTTPResponse.Status = .ok) -> Response {
        guard let ui else {
            return WebUI.html(
                "<!doctype html><title>Docket</title><h1>The web UI's files are missing</h1><p>docketd could not find its WebResources folder next to the binary. Keep the Docket_DocketServer resource bundle beside docketd, or name the folder in DOCKET_WEB_RESOURCES.</p>",
                status: .serviceUnavailable
            )
        }
        return ui.page(template, values, status: status)
    }

    func page(_ template: String, _ values: [String: Any], context: DocketRequestContext, status: HTTPResponse.Status = .ok) -> Response {
        render(template, common(context).merging(values) { $1 }, status: status)
    }

    func errorPage(_ error: WebError, context: DocketRequestContext) -> Response {
        var values = common(context)
        values["title"] = error.heading
        values["heading"] = error.heading
        values["message"] = error.message
        var response = render("error", values, status: error.status)
        if let wait = error.retryAfter ?? (error.status == .serviceUnavailable ? StorageUnavailable.retryAfter : nil) {
            response.headers[.retryAfter] = wait
        }
        return response
    }
}

/// Authentication by the `docket_session` cookie (nothing else), the way to the sign-in page for those without
/// one, the security headers, and every error as a page.
struct WebMiddleware: RouterMiddleware {
    typealias Context = DocketRequestContext

    let pages: WebPages
    let identity: Identity

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        do {
            if let token = request.cookies[WebSessions.cookie]?.value, !token.isEmpty, token.count <= 128 {
                do {
                    context.caller = try await identity.session(token)
                    context.credential = .session(token)
                } catch .sessionEnded {
                    // Signed out (or expired): the page asks to sign in again.
                }
            }
            let path = request.uri.path
            // ServiceNow's page paths only redirect (to a page that asks to sign in, and comes back to it after).
            // The manifest is fetched without cookies (as `<link rel=manifest>` does); it and the service worker
            // hold nothing of anybody's.
            let open = path == "/" || path == "/app/login" || path.hasPrefix("/app/assets/") || path.hasSuffix(".do") || path.hasPrefix("/app/sso/")
                || path == "/app/manifest.webmanifest" || path == "/app/sw.js"
            if !open, context.caller == nil {
                if request.method == .get || request.method == .head, !path.hasPrefix("/app/events"), !path.hasPrefix("/app/lookup") {
                    let target = request.uri.query.map { path + "?" + $0 } ?? path
                    let next = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "/-_.~"))) ?? ""
                    return WebAPI.redirect("/?next=" + next)
                }
                throw WebError(.unauthorized, "You are signed out. Sign in again to continue.")
            }
            var response = try await next(request, context)
            if response.headers[.contentSecurityPolicy] == nil { WebUI.securityHeaders(&response.headers) }
            return response
        } catch {
            return pages.errorPage(webError(error, context: context), context: context)
        }
    }

    private func webError(_ error: any Error, context: Context) -> WebError {
        switch error {
        case let error as WebError: return error
        case let error as EngineError: return WebError(error)
        case let error as ServiceNowError: return WebError(error.status, [error.message, error.detail].compactMap { $0 }.joined(separator: ": "))
        case let error as HTTPError where error.status == .notFound: return WebError(.notFound, "There is no such page.")
        case let error as HTTPError: return WebError(error.status, error.body ?? error.status.reasonPhrase)
        case let refusal as Identity.Refusal:
            switch refusal {
            case .missing, .rejected, .invalidToken, .sessionEnded: return WebError(.unauthorized, "You are signed out. Sign in again to continue.")
            case .throttled:
                var error = WebError(.tooManyRequests, "Too many failed sign-in attempts. Wait a moment and try again.")
                error.retryAfter = refusal.retryAfter
                return error
            case .busy, .unavailable: return WebError(.serviceUnavailable, "Sign-in cannot be checked right now. Try again in a moment.")
            }
        case is LoginFailure: return WebError(.serviceUnavailable, "Sign-in cannot be checked right now. Try again in a moment.")
        case is StorageUnavailable:
            context.logger.warning("Web request refused: the database is unavailable", metadata: ["error": "\(error)"])
            return WebError(.serviceUnavailable, "The server cannot reach its database right now. Try again in a moment.")
        case is NIOTooManyBytesError: return WebError(.contentTooLarge, "That is more than this server accepts in one request.")
        // A malformed body (bad chunk framing) only shows when the form is read.
        case is HTTPParserError: return WebError(.badRequest, "The browser sent a request this server could not read.")
        default:
            context.logger.error("Web request failed", metadata: ["error": "\(error)"])
            return WebError(.internalServerError, "Something went wrong on the server. Try again; if it keeps happening, tell your administrator.")
        }
    }
}
