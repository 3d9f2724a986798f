import AsyncHTTPClient
import DocketTestSupport
import Foundation
import NIOCore
import NIOSSL
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

    @Test("plain HTTP sent to the TLS port is answered with the https:// address to use; TLS on the same port goes on working", .timeLimit(.minutes(2)))
    func plainHTTPToTLSPort() async throws {
        let tls = try await TestCertificates.make()
        defer { tls.remove() }
        try await withLiveServer(tls: tls) { baseURL in
            let plainURL = "http://" + baseURL.dropFirst("https://".count)
            let plain = HTTPClient(eventLoopGroupProvider: .singleton)
            let answer = try await plain.execute(HTTPClientRequest(url: plainURL + "/api/now/table/incident?sysparm_limit=1"), timeout: .seconds(20))
            let text = String(buffer: try await answer.body.collect(upTo: 1 << 16))
            #expect(answer.status.code == 400)
            #expect(text.contains("This port speaks HTTPS"))
            #expect(text.contains("Use " + baseURL + "/api/now/table/incident?sysparm_limit=1"), "\(text)")
            try await plain.shutdown()
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.trustRoots = .file(tls.caFile)
            let secure = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: configuration))
            let live = try await secure.execute(HTTPClientRequest(url: baseURL + "/health/live"), timeout: .seconds(20))
            #expect(live.status == .ok)
            try await secure.shutdown()
        }
    }

    @Test("the advice repeats only a well-formed host and path")
    func plainHTTPAdvice() {
        let good = PlainHTTPOnTLSPort.advice(head: Array("GET /app/work?view=opened HTTP/1.1\r\nHost: docket.example:8443\r\n\r\n".utf8))
        #expect(good.hasSuffix("Use https://docket.example:8443/app/work?view=opened\n"))
        for head in [
            "GET /x HTTP/1.1\r\nHost: evil\u{1b}[31m\r\n\r\n", "GET /<script> HTTP/1.1\r\nHost: a\r\n\r\n", "GET /x HTTP/1.1\r\n\r\n",
            "GARBAGE", "GET http://other/ HTTP/1.1\r\nHost: a\r\n\r\n",
        ] {
            #expect(PlainHTTPOnTLSPort.advice(head: Array(head.utf8)).hasSuffix("Use https:// instead of http://.\n"), "\(head)")
        }
        #expect(PlainHTTPOnTLSPort.advice(head: [0xff, 0xfe, 0x00]).hasSuffix("instead of http://.\n"))
    }
}
