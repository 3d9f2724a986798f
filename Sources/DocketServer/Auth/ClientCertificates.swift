import Crypto
import DocketModel
import Foundation
import NIOCore
import NIOSSL
import SQLKit

/// Client certificates that sign in (with `--tls-client-ca`): TLS has checked that a presented certificate is one
/// of the configured authorities'; this says whose it is. A certificate is registered to one user by the SHA-256 of
/// its DER form (`sys_user_certificate.fingerprint`, by `docketd users certificate`), never by a name it carries.
struct ClientCertificates: Sendable {
    let storage: any Storage

    /// The SHA-256 fingerprint of a certificate's DER form, in hexadecimal.
    static func fingerprint(_ certificate: NIOSSLCertificate) throws -> String {
        Digest.sha256Hex(try certificate.toDERBytes())
    }

    /// The certificate the client of `channel` presented (the TLS connection's: an HTTP/2 stream's parent), already
    /// verified by TLS; nil when the connection is not TLS or the client presented none.
    static func presented(on channel: any Channel) async throws -> NIOSSLCertificate? {
        // An HTTP/1.1 request's channel is the connection; an HTTP/2 stream's is a child of it.
        for candidate in [channel, channel.parent].compactMap({ $0 }) {
            do {
                return try await candidate.nioSSL_peerCertificate().get()
            } catch let error as ChannelPipelineError where error == .notFound {
                continue
            }
        }
        return nil
    }

    /// The user a fingerprint is registered to now; nil when none (or the registration is inactive or expired).
    func userID(fingerprint: String, now: Date = Date()) async throws -> String? {
        guard fingerprint.utf8.count == 64 else { return nil }
        return try await RegisteredCredentials.owner(
            in: "sys_user_certificate", column: "fingerprint", is: fingerprint, storage: storage, now: now
        )
    }
}
