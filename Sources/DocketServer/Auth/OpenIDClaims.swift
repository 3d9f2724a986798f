import Crypto
import DocketModel
import Foundation
import JWTKit

/// What the OpenID provider's tokens say, and how its refusals are worded (RFC 6749 §5.2).
extension OpenIDProvider {
    /// `at_hash`: the left half of the access token's SHA-256, base64url (OpenID Connect Core §3.1.3.6).
    static func atHash(_ accessToken: String) -> String {
        Base64URL.encode(Array(SHA256.hash(data: Data(accessToken.utf8))).prefix(16))
    }

    /// An access token's claims (Keycloak's names).
    struct AccessClaims: JWTPayload, Equatable {
        struct Roles: Codable, Sendable, Equatable { var roles: [String] }
        var iss: String
        var sub: String
        var aud: String
        var azp: String
        var typ: String
        var exp: Int
        var iat: Int
        var auth_time: Int
        var jti: String
        var sid: String
        var scope: String
        var preferred_username: String
        var email: String?
        var name: String?
        var given_name: String?
        var family_name: String?
        var realm_access: Roles

        /// Checked by the provider against its clock and storage.
        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    /// An ID token's claims (OpenID Connect Core §2).
    struct IDClaims: JWTPayload, Equatable {
        var iss: String
        var sub: String
        var aud: String
        var azp: String
        var typ: String
        var exp: Int
        var iat: Int
        var auth_time: Int
        var nonce: String?
        var at_hash: String
        var sid: String
        var preferred_username: String
        var email: String?
        var name: String?
        var given_name: String?
        var family_name: String?

        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    /// A refusal in RFC 6749 §5.2's terms (the dialect renders it as `{"error", "error_description"}`).
    struct Failure: Error, Sendable, Equatable {
        var error: String
        var description: String
        /// 400, 401 for `invalid_client`, 429 or 503 with `retryAfter`.
        var status: Int = 400
        var retryAfter: String? = nil

        static func invalidRequest(_ text: String) -> Failure { Failure(error: "invalid_request", description: text) }
        static func invalidClient(_ text: String) -> Failure { Failure(error: "invalid_client", description: text, status: 401) }
        static func invalidGrant(_ text: String) -> Failure { Failure(error: "invalid_grant", description: text) }
        static func unauthorizedClient(_ text: String) -> Failure { Failure(error: "unauthorized_client", description: text) }
        static let unavailable = Failure(
            error: "temporarily_unavailable", description: "The request cannot be handled right now. Try again shortly.", status: 503,
            retryAfter: StorageUnavailable.retryAfter
        )

        /// A login failure that is no answer about the credentials (throttled, busy, storage down); nil for a rejection.
        static func from(_ refusal: Identity.Refusal) -> Failure? {
            switch refusal {
            case .throttled:
                return Failure(
                    error: "temporarily_unavailable", description: "Too many failed logins. Try again later.", status: 429,
                    retryAfter: refusal.retryAfter
                )
            case .busy, .unavailable:
                var failure = unavailable
                failure.retryAfter = refusal.retryAfter ?? failure.retryAfter
                return failure
            default:
                return nil
            }
        }
    }
}
