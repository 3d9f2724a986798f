import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1

/// The ETO (Efforts to Outcomes) REST API at `/API/{Service}.svc/…`, paths matched case-insensitively: the
/// authentication chain of `Security.svc` (SSO login → enterprises → sites → site login → current program) and
/// `Form.svc`'s programs, and participant reads (``ETOParticipants``). Site-scoped calls carry the `enterpriseGuid` and `securityToken` headers, checked against
/// each other. The context (enterprise, site, program) lives in the engine's tables (``ContextSchema``) and on the
/// site token's session (``ContextSessions``).
struct ETOAPI: Sendable {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let identity: Identity
    let sessions: ContextSessions

    static let zeroGUID = "00000000-0000-0000-0000-000000000000"

    /// Whether a path is ETO's: `/API/<name>.svc…` in any case.
    static func claims(_ path: String) -> Bool {
        let bytes = Array(path.utf8.prefix(64))
        // "/api/" in any case (setting 0x20 lower-cases letters and keeps "/"), then a segment ending in ".svc".
        guard bytes.count > 9, bytes.prefix(5).map({ $0 | 0x20 }) == Array("/api/".utf8) else { return false }
        let segment = bytes.dropFirst(5).prefix { $0 != UInt8(ascii: "/") }.map { $0 | 0x20 }
        return segment.count > 4 && segment.suffix(4) == Array(".svc".utf8)
    }

    func mount() -> DialectMount {
        DialectMount(name: "eto", prefix: "/API", responder: ETOResponder(api: self, router: router().buildResponder()), claims: Self.claims)
    }

    /// Answers a routed request in ETO's error shape, whatever went wrong.
    func respond(_ request: Request, context: Context, _ route: () async throws -> Response) async throws -> Response {
        do {
            return try await route()
        } catch let error as ETOError {
            return try error.response(from: request, context: context)
        } catch let error as EngineError {
            return try ETOError(.badRequest, error.detail ?? error.message).response(from: request, context: context)
        } catch is NIOTooManyBytesError {
            return try ETOError(.contentTooLarge, "Request body too large").response(from: request, context: context)
        } catch let error as HTTPParserError {
            return try ETOError(.badRequest, "Malformed HTTP request: \(error)").response(from: request, context: context)
        } catch let error as HTTPError {
            return try ETOError(error.status, error.body ?? error.status.reasonPhrase).response(from: request, context: context)
        } catch let error as StorageUnavailable {
            context.logger.warning("ETO request refused: the database is unavailable", metadata: ["error": "\(error)"])
            return try ETOError.unavailable("The service is unavailable; try again shortly").response(from: request, context: context)
        } catch {
            context.logger.error("ETO request failed", metadata: ["error": "\(error)"])
            return try ETOError(.internalServerError, "Internal error").response(from: request, context: context)
        }
    }

    /// ETO's operations at their lower-cased paths (``ETOResponder`` lower-cases the request's path before routing;
    /// handlers read parameters in their original case from ``DocketRequestContext/pathSegments``). Each path
    /// takes every method, so that a wrong one is answered 405 naming the right one, as ETO does.
    func router() -> Router<Context> {
        let router = Router(context: Context.self)
        func on(_ path: String, _ handle: @escaping @Sendable (Request, Context, [String]) async throws -> Response) {
            for method: HTTPRequest.Method in [.get, .head, .post, .put, .patch, .delete, .options] {
                router.on(RouterPath("/api/" + path), method: method) { request, context in
                    try await self.respond(request, context: context) { try await handle(request, context, context.pathSegments) }
                }
            }
        }
        @Sendable func expect(_ method: HTTPRequest.Method, _ request: Request) throws {
            guard request.method == method || (method == .get && request.method == .head) else {
                throw ETOError(.methodNotAllowed, "\(request.method) is not allowed here; use \(method)")
            }
        }
        on("security.svc/ssoauthenticate") { request, context, _ in
            try expect(.post, request)
            return try await self.ssoAuthenticate(request, context: context)
        }
        on("security.svc/getssoenterprises/{token}") { request, _, parts in
            try expect(.get, request)
            return try await self.enterprises(token: parts[3])
        }
        on("security.svc/getssosites/{token}/{enterprise}") { request, _, parts in
            try expect(.get, request)
            return try await self.sites(token: parts[3], enterprise: parts[4])
        }
        on("security.svc/ssositelogin/{site}/{enterprise}/{token}/{offset}") { request, _, parts in
            try expect(.get, request)
            return try await self.siteLogin(site: parts[3], enterprise: parts[4], token: parts[5], offset: parts[6])
        }
        on("security.svc/updatecurrentprogram") { request, context, _ in
            try expect(.post, request)
            return try await self.updateCurrentProgram(request, context: context)
        }
        on("form.svc/forms/program/getprograms/{site}") { request, _, parts in
            try expect(.get, request)
            return try await self.programs(site: parts[5], request: request)
        }
        on("touchpoint.svc/listtouchpoint") { request, _, _ in
            try expect(.get, request)
            return try await self.listTouchPoints(request: request)
        }
        on("touchpoint.svc/gettouchpoint") { request, _, _ in
            try expect(.get, request)
            return try await self.getTouchPoint(request: request)
        }
        on("touchpoint.svc/listtouchpointresponses") { request, _, _ in
            try expect(.get, request)
            return try await self.listResponses(request: request)
        }
        on("touchpoint.svc/gettouchpointresponse") { request, _, _ in
            try expect(.get, request)
            return try await self.getResponse(request: request)
        }
        for operation in ["touchpointresponseadd", "touchpointresponseupdate"] {
            on("touchpoint.svc/" + operation) { request, context, _ in
                try expect(.post, request)
                return try await self.saveResponse(request, context: context, update: operation == "touchpointresponseupdate")
            }
        }
        on("actor.svc/participant/enrollment") { request, context, _ in
            try expect(.post, request)
            return try await self.saveEnrollment(request, context: context)
        }
        on("actor.svc/participant/enrollment/{clid}") { request, _, parts in
            try expect(.get, request)
            return try await self.enrollments(parts[4], request: request)
        }
        on("actor.svc/participant") { request, context, _ in
            guard request.method == .post else { throw ETOError(.notFound, "No such service operation: \(request.uri.path.prefix(200))") }
            return try await self.saveParticipant(request, context: context)
        }
        on("actor.svc/participant/{clid}") { request, context, parts in
            if request.method == .post { return try await self.saveParticipant(request, context: context) }
            try expect(.get, request)
            return try await self.participant(parts[3], request: request)
        }
        on("search.svc/search/{program}/{term}") { request, _, parts in
            try expect(.get, request)
            return try await self.search(program: parts[3], term: parts[4], request: request)
        }
        return router
    }

    // MARK: Security.svc

    /// `POST SSOAuthenticate/ {"security":{"Email","Password"}}`: 200 always for a readable body; a failed login
    /// has the all-zero GUID and a non-zero `AuthStatusCode` (1 wrong e-mail or password, 2 too many failures).
    private func ssoAuthenticate(_ request: Request, context: Context) async throws -> Response {
        let body = try await Self.body(request, context: context)
        let security = body["security"] ?? body
        guard let email = security["Email"]?.stringValue, let password = security["Password"]?.stringValue,
            email.utf8.count <= 254
        else { throw ETOError(.badRequest, "Send {\"security\":{\"Email\":…,\"Password\":…}}") }
        // Staff sign in with their e-mail address; an unknown one is checked against a decoy like a wrong password.
        let userName = try await userName(email: email) ?? " unknown e-mail " + email
        func answer(_ token: String, code: Int, offset: Int = 0) -> Response {
            Response.json(JSONValue(members: [
                ("SSOAuthenticateResult", JSONValue(members: [
                    ("AccessKey", .string(token == Self.zeroGUID ? Self.zeroGUID : UUID().uuidString.lowercased())),
                    ("AuthStatusCode", .integer(code)), ("Email", .string(email)), ("MarketplaceId", .integer(0)),
                    ("Password", .string("")), ("SSOAuthToken", .string(token)), ("TimeZoneOffset", .integer(offset)),
                ])),
            ]))
        }
        let caller: Caller
        let proof: UserDirectory.CredentialProof
        do {
            (caller, proof) = try await identity.verify(userName: userName, password: password, address: context.clientAddress)
        } catch {
            switch error {
            case .throttled:
                var response = answer(Self.zeroGUID, code: 2)
                response.headers[.retryAfter] = error.retryAfter
                return response
            case .busy, .unavailable: throw ETOError.unavailable("Logins cannot be checked right now; try again")
            default: return answer(Self.zeroGUID, code: 1)
            }
        }
        // Nil: the password changed (or the account was locked) while it was checked.
        guard let token = try await sessions.start(
            .init(kind: .sso, userID: caller.userID, enterprise: "", site: 0, program: 0, utcOffset: 0), proof: proof
        ) else { return answer(Self.zeroGUID, code: 1) }
        return answer(token, code: 0)
    }

    /// `GET GetSSOEnterprises/{SSOAuthToken}`: the enterprises where the user is staff of a site.
    private func enterprises(token: String) async throws -> Response {
        let user = try await ssoUser(token)
        let memberships = try await staffSites(of: user)
        var seen = Set<String>()
        let list = memberships.filter { seen.insert($0.enterpriseGUID).inserted }.sorted { $0.enterpriseName < $1.enterpriseName }
        return Response.json(.array(list.map {
            JSONValue(members: [("Key", .string($0.enterpriseGUID)), ("Value", .string($0.enterpriseName))])
        }))
    }

    /// `GET GetSSOSites/{SSOAuthToken}/{enterpriseGuid}`: the user's sites in that enterprise.
    private func sites(token: String, enterprise: String) async throws -> Response {
        let user = try await ssoUser(token)
        let sites = try await staffSites(of: user).filter { $0.enterpriseGUID.caseInsensitiveCompare(enterprise) == .orderedSame }
        guard !sites.isEmpty else { throw ETOError(.forbidden, "You are not staff of enterprise \(enterprise.prefix(40))") }
        return Response.json(.array(sites.sorted { $0.number < $1.number }.map {
            JSONValue(members: [("Key", .integer($0.number)), ("Value", .string($0.name))])
        }))
    }

    /// `GET SSOSiteLogin/{SiteID}/{enterpriseGuid}/{SSOAuthToken}/{utcOffset}`: a site token, as a bare JSON string.
    private func siteLogin(site: String, enterprise: String, token: String, offset: String) async throws -> Response {
        let user = try await ssoUser(token)
        guard let offset = Int(offset), (-1440...1440).contains(offset) else {
            throw ETOError(.badRequest, "InvalidUTC: the UTC offset must be a whole number of hours or minutes")
        }
        guard let number = Int(site) else { throw ETOError(.badRequest, "The SiteID must be a number") }
        let sites = try await staffSites(of: user)
        guard let chosen = sites.first(where: { $0.number == number }) else {
            throw ETOError(.forbidden, "You are not staff of site \(number)")
        }
        guard chosen.enterpriseGUID.caseInsensitiveCompare(enterprise) == .orderedSame else {
            throw ETOError(.forbidden, "Site \(number) is not a site of enterprise \(enterprise.prefix(40))")
        }
        // Only while the SSO token it comes from lasts (a logoff or a new password meanwhile ended it).
        guard let siteToken = try await sessions.start(.init(
            kind: .site, userID: user, enterprise: chosen.enterpriseGUID, site: number, program: 0, utcOffset: offset
        ), proof: .init(userID: user, parent: .session(hash: SessionStore.hash(token.lowercased())))) else {
            throw ETOError(.unauthorized, "NoSSOAuthToken: the SSO token is not valid; sign in again")
        }
        return Response.json(.string(siteToken))
    }

    /// `POST UpdateCurrentProgram/ {"ProgramID": n}` (a number or a string): the site session's current program.
    private func updateCurrentProgram(_ request: Request, context: Context) async throws -> Response {
        let session = try await siteSession(request)
        let body = try await Self.body(request, context: context)
        guard let id = body["ProgramID"]?.intValue ?? body["ProgramID"]?.stringValue.flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) })
        else { throw ETOError(.badRequest, "Send {\"ProgramID\": …}") }
        guard let program = try await programs(ofSite: session.site).first(where: { $0.number == id }) else {
            throw ETOError(.forbidden, "Program \(id) is not a program of site \(session.site)")
        }
        guard !program.disabled else { throw ETOError(.badRequest, "Program \(id) (\(program.name)) is disabled") }
        try await sessions.setProgram(session.token, program: id)
        let site = try await staffSites(of: session.caller.userID).first { $0.number == session.site }
        return Response.json(JSONValue(members: [
            ("ProgramID", .integer(id)), ("ProgramName", .string(program.name)), ("SiteID", .integer(session.site)),
            ("SiteName", .string(site?.name ?? "")), ("EnterpriseGuid", .string(session.enterprise)),
        ]))
    }

    // MARK: Form.svc

    /// `GET Forms/Program/GetPrograms/{SiteID}`: the site's programs, disabled ones flagged.
    private func programs(site: String, request: Request) async throws -> Response {
        let session = try await siteSession(request)
        guard let number = Int(site) else { throw ETOError(.badRequest, "The SiteID must be a number") }
        guard number == session.site else { throw ETOError(.forbidden, "This security token is for site \(session.site), not \(number)") }
        return Response.json(.array(try await programs(ofSite: number).map {
            JSONValue(members: [("ID", .integer($0.number)), ("Name", .string($0.name)), ("Disabled", .bool($0.disabled))])
        }))
    }

    // MARK: Context

    struct Site {
        var number: Int
        var name: String
        var enterpriseGUID: String
        var enterpriseName: String
    }

    /// The active sites of active enterprises where a user is staff.
    func staffSites(of userID: String) async throws -> [Site] {
        let members = try await store.list(
            RecordQuery(
                table: "sys_site_member", query: EncodedQuery().and("user", .equals, userID).and("site.active", .equals, "true")
                    .and("site.enterprise.active", .equals, "true"),
                fields: ["site.number", "site.name", "site.enterprise.guid", "site.enterprise.name"], limit: 1000, count: false
            ),
            caller: .system
        )
        var seen = Set<Int>()
        return members.records.compactMap { record in
            guard let number = Int(record["site.number"]), seen.insert(number).inserted else { return nil }
            return Site(
                number: number, name: record["site.name"], enterpriseGUID: record["site.enterprise.guid"],
                enterpriseName: record["site.enterprise.name"]
            )
        }
    }

    struct Program {
        var number: Int
        var name: String
        var disabled: Bool
    }

    func programs(ofSite site: Int) async throws -> [Program] {
        let records = try await store.list(
            RecordQuery(
                table: "sys_program", query: EncodedQuery().and("site.number", .equals, String(site)).orderBy("number"),
                fields: ["number", "name", "disabled"], limit: 1000, count: false
            ),
            caller: .system
        )
        return records.records.compactMap { record in
            Int(record["number"]).map { Program(number: $0, name: record["name"], disabled: record["disabled"] == "true") }
        }
    }

    private func userName(email: String) async throws -> String? {
        let found = try await store.list(
            RecordQuery(
                table: "sys_user", query: EncodedQuery().and("email", .equals, email.lowercased()),
                fields: ["user_name"], limit: 1, count: false
            ),
            caller: .system
        )
        return found.records.first.map { $0["user_name"] }
    }

    /// The user of a live SSO token (who must still be able to sign in), through ``Identity``.
    private func ssoUser(_ token: String) async throws -> String {
        do {
            return try await identity.context(token, kind: .sso).caller.userID
        } catch .unavailable, .busy {
            throw ETOError.unavailable("Logins cannot be checked right now; try again")
        } catch {
            throw ETOError(.unauthorized, "NoSSOAuthToken: the SSO token is not valid; sign in again")
        }
    }

    /// A signed-in site: the session's context, its token, and its user as a caller with the session's enterprise
    /// active (so that the engine's scoping narrows to it).
    struct SiteLogin: Sendable {
        var site: Int
        var program: Int
        var enterprise: String
        var token: String
        var caller: Caller
    }

    /// The site session named by the `securityToken` header, which must belong to the `enterpriseGuid` header's
    /// enterprise.
    func siteSession(_ request: Request) async throws -> SiteLogin {
        guard let enterprise = request.headers[HTTPField.Name("enterpriseGuid")!], !enterprise.isEmpty else {
            throw ETOError(.unauthorized, "NoEnterpriseIDSelected: send the enterpriseGuid header")
        }
        guard let token = request.headers[HTTPField.Name("securityToken")!], !token.isEmpty else {
            throw ETOError(.unauthorized, "NoSiteIDSelected: send the securityToken header from SSOSiteLogin")
        }
        let bare = token.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        let session: ContextSessions.Context
        var caller: Caller
        do {
            (session, caller) = try await identity.context(bare, kind: .site)
        } catch .unavailable, .busy {
            throw ETOError.unavailable("Logins cannot be checked right now; try again")
        } catch {
            throw ETOError(.unauthorized, "The security token is not valid; sign in to the site again")
        }
        guard session.enterprise.caseInsensitiveCompare(enterprise) == .orderedSame else {
            throw ETOError(.unauthorized, "The security token is not for enterprise \(enterprise.prefix(40))")
        }
        caller.activeDomain = try await enterpriseID(guid: session.enterprise)
        return SiteLogin(site: session.site, program: session.program, enterprise: session.enterprise, token: bare, caller: caller)
    }

    private func enterpriseID(guid: String) async throws -> String? {
        try await store.list(
            RecordQuery(table: "sys_enterprise", query: EncodedQuery().and("guid", .equals, guid), fields: ["sys_id"], limit: 1, count: false),
            caller: .system
        ).records.first?.sysID
    }

    static func body(_ request: Request, context: Context) async throws -> JSONValue {
        guard let json = try await RequestBody.object(from: request, upTo: min(context.maxBodySize, 1 << 20)) else {
            throw ETOError(.badRequest, "The body must be a JSON object")
        }
        return json
    }
}

/// ETO's paths match in any case: the path is lower-cased for routing (the query is left as it is), and its
/// segments are kept, percent-decoded and in their original case, for the handlers (a token or a search term keeps
/// its case).
struct ETOResponder: HTTPResponder {
    typealias Context = DocketRequestContext
    let api: ETOAPI
    let router: any HTTPResponder<Context>

    func respond(to request: Request, context: Context) async throws -> Response {
        var context = context
        return try await api.respond(request, context: context) {
            let raw = request.uri.path.split(separator: "/").map(String.init)
            guard raw.count <= 12 else { throw ETOError(.notFound, "No such service operation") }
            context.pathSegments = raw.map { $0.removingPercentEncoding ?? $0 }
            var head = request.head
            let full = head.path ?? "/"
            let queryStart = full.firstIndex(of: "?") ?? full.endIndex
            head.path = full[..<queryStart].lowercased() + full[queryStart...]
            let response = try await router.respond(to: Request(head: head, body: request.body), context: context)
            // The router's own answer for a path no route matches.
            guard context.endpointPath == "NotFound" else { return response }
            throw ETOError(.notFound, "No such service operation: \(request.uri.path.prefix(200))")
        }
    }
}
