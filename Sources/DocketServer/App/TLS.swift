import Foundation
import NIOSSL

/// Loads the HTTPS certificate chain and key named in the configuration, with errors that say which file
/// is wrong and why.
public enum TLSSetup {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    static func serverConfiguration(certificatePath: String, keyPath: String, clientCAPath: String? = nil) throws -> TLSConfiguration {
        for (path, what) in [(certificatePath, "certificate"), (keyPath, "private key")]
        where !FileManager.default.isReadableFile(atPath: path) {
            throw Failure(description: "Cannot read the TLS \(what) file '\(path)'.")
        }
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificatePath)
        } catch {
            throw Failure(description: "'\(certificatePath)' is not a PEM certificate (\(error)).")
        }
        guard !chain.isEmpty else { throw Failure(description: "'\(certificatePath)' holds no certificate.") }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        } catch {
            throw Failure(description: "'\(keyPath)' is not a PEM private key (\(error)).")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key)
        )
        if let clientCAPath {
            guard FileManager.default.isReadableFile(atPath: clientCAPath) else {
                throw Failure(description: "Cannot read the client certificate authorities file '\(clientCAPath)'.")
            }
            let authorities: [NIOSSLCertificate]
            do {
                authorities = try NIOSSLCertificate.fromPEMFile(clientCAPath)
            } catch {
                throw Failure(description: "'\(clientCAPath)' is not a PEM certificate (\(error)).")
            }
            guard !authorities.isEmpty else { throw Failure(description: "'\(clientCAPath)' holds no certificate.") }
            // A client may present a certificate (it must then be one of these authorities'); one that presents
            // none signs in as before.
            configuration.certificateVerification = .optionalVerification
            configuration.trustRoots = .certificates(authorities)
            configuration.sendCANameList = true
        }
        return configuration
    }
}
