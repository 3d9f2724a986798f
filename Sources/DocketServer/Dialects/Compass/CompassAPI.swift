import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdAuth
import NIOCore
import NIOHTTP1

extension CompassError where Shape == CompassErrorShape {
    static var unauthenticated: CompassError {
        var error = CompassError(.unauthorized, "Not authenticated: log in with POST /authenticate and send its token as a bearer token")
        error.headers[.wwwAuthenticate] = "Bearer realm=\"docket\""
        return error
    }

    /// An engine refusal in Compass's words.
    init(_ error: EngineError) {
        switch error.code {
        case .notFound: self.init(.notFound, "Record not found")
        case .forbidden, .forbiddenQuery: self.init(.forbidden, "You are not allowed to do this: " + error.description)
        case .conflict: self.init(.conflict, error.description)
        case .quotaExceeded: self.init(.contentTooLarge, error.description)
        case .invalidTable, .badRequest:
            if let validation = error.validation,
                let type = CompassDirectory.recordTypes.first(where: { $0.table == error.table })
            {
                // The fields in Compass's names: "Mandatory fields are empty: Headline (Submit)".
                func names(_ columns: [String]) -> String { columns.map { type.fieldName(ofColumn: $0) }.joined(separator: ", ") }
                var parts: [String] = []
                if !validation.missing.isEmpty { parts.append("Mandatory fields are empty: " + names(validation.missing)) }
                if !validation.readOnly.isEmpty { parts.append("read-only fields cannot be changed: " + names(validation.readOnly)) }
                self.init(.badRequest, parts.joined(separator: "; ") + (validation.action.map { " (\($0))" } ?? ""))
            } else {
                self.init(.badRequest, error.detail ?? error.message)
            }
        }
    }
}

/// The Compass dialect's errors and authentication, for every request below `/ccmweb/rest`: a bearer token from
/// `POST /authenticate` (``CompassTokens``), except for the repository list and the login itself.
struct CompassMiddleware: RouterMiddleware {
    typealias Context = DocketRequestContext

    let identity: Identity

    static let open: Set<String> = ["/ccmweb/rest/repos", "/ccmweb/rest/authenticate"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            var context = context
            let path = request.uri.path.count > 1 && request.uri.path.hasSuffix("/")
                ? String(request.uri.path.dropLast()) : request.uri.path
            if !Self.open.contains(path) {
                guard let bearer = request.headers.bearer else { throw CompassError.unauthenticated }
                let (claims, caller): (CompassTokens.Claims, Caller)
                do {
                    (claims, caller) = try await identity.compassToken(bearer.token)
                } catch .unavailable, .busy {
                    throw CompassError.unavailable("The service is unavailable; try again shortly")
                } catch {
                    throw CompassError.unauthenticated
                }
                context.caller = caller
                context.credential = .compass(bearer.token)
                context.compassClaims = claims
            }
            return try await next(request, context)
        } catch let error as CompassError {
            throw error
        } catch let error as HTTPError where error.status == .notFound {
            throw CompassError(.notFound, "No such resource: \(request.method) \(request.uri.path.prefix(200))")
        } catch let error as HTTPError {
            throw CompassError(error.status, error.body ?? error.status.reasonPhrase)
        } catch let error as EngineError {
            throw CompassError(error)
        } catch let error where error is LoginFailure || error is StorageUnavailable {
            if error is StorageUnavailable {
                context.logger.warning("Compass request refused: the database is unavailable", metadata: ["error": "\(error)"])
            }
            throw CompassError.unavailable("The service is unavailable; try again shortly")
        } catch let error as HTTPParserError {
            throw CompassError(.badRequest, "Malformed HTTP request: \(error)")
        } catch is NIOTooManyBytesError {
            throw CompassError(.contentTooLarge, "Request body too large")
        } catch {
            context.logger.error("Compass request failed", metadata: ["error": "\(error)"])
            throw CompassError(.internalServerError, "Internal error")
        }
    }
}

/// The Compass ("Traxiem") REST API at `/ccmweb/rest`: repositories, login, databases, record types and records.
struct CompassAPI {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let configuration: Configuration
    let identity: Identity
    let tokens: CompassTokens

    func mount() -> DialectMount {
        let router = Router(context: Context.self)
        router.add(middleware: BodyLimitMiddleware(maxBodySize: configuration.maxBodySize))
        router.add(middleware: CompassMiddleware(identity: identity))
        let base = "/ccmweb/rest"
        router.get(RouterPath(base + "/repos")) { _, _ in
            Response.json(.array(CompassDirectory.repositories.map { .object(["name": .string($0)]) }))
        }
        router.post(RouterPath(base + "/authenticate")) { request, context in try await login(request, context: context) }
        router.post(RouterPath(base + "/authenticate/logoff")) { _, context in
            if let claims = context.compassClaims { try await tokens.end(claims) }
            return Response(status: .ok)
        }
        router.get(RouterPath(base + "/repos/:repo/databases")) { _, context in
            // The repository named must exist and be the token's.
            guard let repo = context.parameters.get("repo").flatMap(CompassDirectory.repository) else {
                throw CompassError(.notFound, "No repository \(context.parameters.get("repo") ?? "")")
            }
            if let claims = context.compassClaims, claims.repo.caseInsensitiveCompare(repo) != .orderedSame {
                throw CompassError(.forbidden, "This token is for \(claims.repo); log in to \(repo)")
            }
            return Response.json(.array(CompassDirectory.databases.map {
                JSONValue(members: [("name", .string($0.name)), ("dbId", .string($0.dbId))])
            }))
        }
        router.get(RouterPath(base + "/repos/:repo/databases/:db")) { _, context in
            let database = try scope(context)
            return Response.json(JSONValue(members: [
                ("name", .string(database.name)), ("description", .string(database.description)), ("isMaster", .bool(true)),
                ("entityDefNames", .array(CompassDirectory.recordTypes.map { .string($0.name) })),
                ("entityDefNamesForSubmit", .array(CompassDirectory.recordTypes.map { .string($0.name) })),
                ("entityDefFamilyNames", .array([])),
            ]))
        }
        let records = CompassRecords(store: store)
        records.add(to: router, base: base + "/repos/:repo/databases/:db")
        CompassEdits(store: store, records: records).add(to: router, base: base + "/repos/:repo/databases/:db")
        CompassQueries(store: store, records: records, tokens: tokens).add(to: router, base: base + "/repos/:repo/databases/:db")
        return DialectMount(name: "compass", prefix: base, responder: router.buildResponder())
    }

    /// `POST /authenticate {username, password, repo, db}` → 201 `{token}`.
    private func login(_ request: Request, context: Context) async throws -> Response {
        let body = try await CompassRecords.body(request, context: context)
        guard let user = body["username"]?.stringValue, !user.isEmpty, let password = body["password"]?.stringValue
        else { throw CompassError(.badRequest, "Send username, password, repo and db") }
        guard let repo = body["repo"]?.stringValue.flatMap(CompassDirectory.repository) else {
            throw CompassError(.badRequest, "Unknown repository \(body["repo"]?.stringValue ?? ""); GET /repos lists them")
        }
        guard let database = body["db"]?.stringValue.flatMap(CompassDirectory.database) else {
            throw CompassError(.badRequest, "Unknown database \(body["db"]?.stringValue ?? "") in \(repo)")
        }
        let caller: Caller
        let proof: UserDirectory.CredentialProof
        do {
            (caller, proof) = try await identity.verify(userName: user, password: password, address: context.clientAddress)
        } catch {
            switch error {
            case .throttled:
                var refusal = CompassError(.tooManyRequests, "Too many failed login attempts; try again later")
                refusal.headers[.retryAfter] = error.retryAfter
                throw refusal
            case .busy, .unavailable: throw CompassError.unavailable("Logins cannot be checked right now; try again")
            default: throw CompassError(.unauthorized, "Invalid user name or password")
            }
        }
        // Nil: the password changed (or the account was locked) while it was checked.
        guard let token = try await tokens.issue(
            userID: caller.userID, userName: caller.userName, repo: repo, database: database.name, proof: proof
        ) else { throw CompassError(.unauthorized, "Invalid user name or password") }
        return Response.json(.object(["token": .string(token)]), status: .created)
    }

    /// The database a path names, which must be the one the caller's token is bound to.
    private func scope(_ context: Context) throws -> (name: String, dbId: String, description: String) {
        try CompassRecords.scope(context)
    }
}
