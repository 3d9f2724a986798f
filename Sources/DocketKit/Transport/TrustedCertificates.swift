import Foundation

/// Certificates to trust besides the system's: the certificate authority of a self-hosted docketd (the CA that
/// signed its `--tls-cert`), given as a PEM file.
///
/// ```swift
/// let ca = try TrustedCertificates(pemFile: "/etc/docket/ca.pem")
/// let client = try DocketClient(instance: "https://docket.internal:8443", credentials: credentials,
///                               transport: Transports.platform(trusting: ca))
/// ```
public struct TrustedCertificates: Sendable, Equatable {
    /// The PEM file.
    public let pemFile: String
    /// The DER bytes of each certificate in it.
    public let certificates: [Data]

    /// Reads the PEM file; throws a ``DocketError`` when it cannot be read or holds no certificate.
    public init(pemFile: String) throws {
        let text: String
        do {
            text = try String(contentsOfFile: pemFile, encoding: .utf8)
        } catch {
            throw DocketError(kind: .invalidRequest, message: "cannot read the CA file \(pemFile)", detail: error.localizedDescription)
        }
        let certificates = Self.der(fromPEM: text)
        guard !certificates.isEmpty else {
            throw DocketError(
                kind: .invalidRequest, message: "\(pemFile) holds no certificate (a PEM file, -----BEGIN CERTIFICATE-----)"
            )
        }
        self.pemFile = pemFile
        self.certificates = certificates
    }

    /// The certificates of a PEM text, as DER.
    static func der(fromPEM text: String) -> [Data] {
        var certificates: [Data] = []
        var base64: String? = nil
        for line in text.split(whereSeparator: \.isNewline).map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if line == "-----BEGIN CERTIFICATE-----" {
                base64 = ""
            } else if line == "-----END CERTIFICATE-----" {
                if let encoded = base64, let data = Data(base64Encoded: encoded) { certificates.append(data) }
                base64 = nil
            } else if base64 != nil {
                base64? += line
            }
        }
        return certificates
    }
}

/// The transports DocketKit ships.
public enum Transports {
    /// The transport of this platform that trusts `certificates` besides the system's: `URLSession` (on Apple
    /// platforms with the certificates as extra anchors), or on Linux, where `URLSession` only trusts the system's
    /// store, SwiftNIO's HTTP client when there are certificates to add.
    public static func platform(trusting certificates: TrustedCertificates? = nil) throws -> any StreamingTransport {
        #if canImport(AsyncHTTPClient)
        if let certificates { return try NIOHTTPTransport(trusting: certificates) }
        #endif
        return URLSessionTransport(trusting: certificates)
    }
}
