import DocketModel
import Foundation
import Hummingbird
import HummingbirdAuth

/// `POST /oauth_token.do` (password and refresh_token grants, form-encoded) and `/oauth_revoke_token.do`,
/// answering as a ServiceNow instance does: every failure at the token endpoint is the same 401.
struct OAuthController {
    typealias Context = DocketRequestContext

    let identity: Identity
    var oauth: OAuthService { identity.oauth }

    func add(to router: Router<Context>) {
        router.post("/oauth_token.do", use: token)
        router.get("/oauth_revoke_token.do", use: revoke)
        router.post("/oauth_revoke_token.do", use: revoke)
    }

    static let accessDenied: JSONValue = .object([
        "error_description": .string("access_denied"), "error": .string("server_error")])

    @Sendable func token(_ request: Request, context: Context) async throws -> Response {
        let type = request.headers[.contentType]?.lowercased() ?? ""
        guard type.hasPrefix("application/x-www-form-urlencoded") else {
            return Self.response(
                .object([
                    "error_description": .string("The token request must be application/x-www-form-urlencoded"),
                    "error": .string("invalid_request")]), status: .badRequest
            )
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: 64 * 1024)
        } catch {
            return Self.response(Self.accessDenied, status: .contentTooLarge)
        }
        var form: [String: String] = [:]
        for (name, value) in FormQuery.parse(String(buffer: body)) where form[name] == nil { form[name] = value }
        let basic = request.headers.basic.map { (id: $0.username, secret: $0.password) }
        let outcome: OAuthService.Grant?
        do {
            outcome = try await identity.grant(form: form, basicClient: basic, address: context.clientAddress)
        } catch {
            // Not checked at all (throttled, busy, storage down): say so, with when to come back.
            let failure = ServiceNowError(error)
            var response = Self.response(
                .object(["error_description": .string(failure.message), "error": .string("temporarily_unavailable")]),
                status: failure.status
            )
            response.headers.append(contentsOf: failure.headers)
            return response
        }
        guard let grant = outcome else {
            context.logger.info("OAuth grant refused", metadata: ["grant_type": "\(form["grant_type"] ?? "")"])
            return Self.response(Self.accessDenied, status: .unauthorized)
        }
        return Self.response(grant.json, status: .ok)
    }

    /// Revokes the token given as `token` (query or form); needs no authentication, answers 200 either way.
    @Sendable func revoke(_ request: Request, context: Context) async throws -> Response {
        var token = FormQuery.parse(request.uri.query).first { $0.0 == "token" }?.1
        if token == nil, request.method == .post {
            guard let body = try? await request.body.collect(upTo: 64 * 1024) else {
                return Self.response(Self.accessDenied, status: .contentTooLarge)
            }
            token = FormQuery.parse(String(buffer: body)).first { $0.0 == "token" }?.1
        }
        if let token, !token.isEmpty {
            do {
                try await oauth.revoke(token: token)
            } catch {
                // Not recorded: the token may still work, so success is not claimed (RFC 7009 §2.2.1).
                var response = Self.response(
                    .object([
                        "error_description": .string("The revocation could not be recorded; try again"),
                        "error": .string("temporarily_unavailable")]),
                    status: .serviceUnavailable
                )
                response.headers[.retryAfter] = StorageUnavailable.retryAfter
                return response
            }
        }
        return Response(status: .ok, headers: [.cacheControl: "no-store"])
    }

    private static func response(_ body: JSONValue, status: HTTPResponse.Status) -> Response {
        var response = Response.json(body, status: status)
        response.headers[.cacheControl] = "no-store"
        response.headers[.pragma] = "no-cache"
        return response
    }
}
