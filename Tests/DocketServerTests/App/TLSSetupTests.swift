import Foundation
import Testing

@testable import DocketServer

@Suite("TLS configuration errors name the file and the problem")
struct TLSSetupTests {
    @Test("a missing file, and a file that is not PEM, are refused before the server starts")
    func errors() throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let garbage = directory.path + "/garbage.pem"
        try Data("not a certificate".utf8).write(to: URL(fileURLWithPath: garbage))
        let missing = #expect(throws: TLSSetup.Failure.self) {
            try TLSSetup.serverConfiguration(certificatePath: directory.path + "/none.pem", keyPath: garbage)
        }
        #expect(missing?.description == "Cannot read the TLS certificate file '\(directory.path)/none.pem'.")
        let invalid = #expect(throws: TLSSetup.Failure.self) {
            try TLSSetup.serverConfiguration(certificatePath: garbage, keyPath: garbage)
        }
        #expect(invalid?.description.hasPrefix("'\(garbage)' is not a PEM certificate") == true)
    }

    @Test("a configuration without TLS files serves plain HTTP")
    func plain() {
        #expect(!Configuration().usesTLS)
        #expect(Configuration(tlsCertificatePath: "c", tlsKeyPath: "k").usesTLS)
        #expect(!Configuration(tlsCertificatePath: "c").usesTLS)
    }
}
