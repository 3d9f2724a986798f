import AsyncHTTPClient
import DocketModel
import DocketTestSupport
import Foundation
import NIOCore
import NIOSSL
import Synchronization
import Testing

@testable import DocketServer

/// Client certificates that sign in (`--tls-client-ca`, `docketd users certificate`), as Ansible's servicenow.itsm
/// uses them: over HTTPS, HTTP/1.1 and HTTP/2, whatever else the request carries.
@Suite("Client certificates")
struct ClientCertificateTests {
    @Test("a registered certificate of the trusted authority signs in as its user; others are refused or count for nothing", .timeLimit(.minutes(2)))
    func signIn() async throws {
        let tls = try await TestCertificates.make()
        defer { tls.remove() }
        let folder = Mutex<String?>(nil)
        try await withLiveServer(tls: tls, configure: { configuration in
            configuration.tlsClientCAPath = tls.caFile
            folder.withLock { $0 = configuration.dataDirectory }
        }) { baseURL in
            let dataDirectory = try #require(folder.withLock { $0 })
            let configuration = Configuration(dataDirectory: dataDirectory)
            let fingerprint = try await UserAdministration.registerCertificate(
                in: configuration, userName: "itil.user", certificatePath: tls.clientCertificateFile
            )
            #expect(fingerprint.count == 64)
            await #expect(throws: UserAdministration.Failure.self) {
                _ = try await UserAdministration.registerCertificate(
                    in: configuration, userName: "john.doe", certificatePath: tls.clientCertificateFile
                )
            }
            await #expect(throws: UserAdministration.Failure.self) {
                _ = try await UserAdministration.registerCertificate(in: configuration, userName: "john.doe", certificatePath: tls.caFile + ".missing")
            }

            func client(certificate: String?, key: String?, http2: Bool) throws -> HTTPClient {
                var configuration = TLSConfiguration.makeClientConfiguration()
                configuration.trustRoots = .file(tls.caFile)
                if let certificate, let key {
                    configuration.certificateChain = try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) }
                    configuration.privateKey = .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))
                }
                var settings = HTTPClient.Configuration(tlsConfiguration: configuration)
                settings.httpVersion = http2 ? .automatic : .http1Only
                return HTTPClient(eventLoopGroupProvider: .singleton, configuration: settings)
            }
            func user(_ http: HTTPClient, basic: String? = nil) async throws -> (status: Int, body: String) {
                var request = HTTPClientRequest(url: baseURL + "/api/now/table/sys_user?user_name=itil.user&sysparm_fields=user_name")
                if let basic { request.headers.add(name: "Authorization", value: "Basic " + Data(basic.utf8).base64EncodedString()) }
                let response = try await http.execute(request, timeout: .seconds(20))
                let body = try await response.body.collect(upTo: 1 << 20)
                return (Int(response.status.code), String(buffer: body))
            }
            for http2 in [false, true] {
                let http = try client(certificate: tls.clientCertificateFile, key: tls.clientKeyFile, http2: http2)
                // The certificate alone, and beside the empty Basic header the collection sends: itil.user.
                let alone = try await user(http)
                #expect(alone.status == 200 && alone.body.contains("itil.user"))
                let probe = try await http.execute(HTTPClientRequest(url: baseURL + "/health/live"), timeout: .seconds(20))
                #expect(probe.version == (http2 ? .http2 : .http1_1))
                let beside = try await user(http, basic: "None:")
                #expect(beside.status == 200)
                // A sign-in made with it is itil.user's.
                var made = HTTPClientRequest(url: baseURL + "/api/now/table/incident")
                made.method = .POST
                made.headers.add(name: "Content-Type", value: "application/json")
                made.body = .bytes(ByteBuffer(string: #"{"short_description":"by certificate"}"#))
                let answer = try await http.execute(made, timeout: .seconds(20))
                let created = try JSONValue.parse(Data((try await answer.body.collect(upTo: 1 << 20)).readableBytesView))
                #expect(created["result"]?["sys_created_by"]?.stringValue == "itil.user")
                try await http.shutdown()
            }
            // Without a certificate: other credentials as before.
            let plain = try client(certificate: nil, key: nil, http2: false)
            #expect(try await user(plain).status == 401)
            #expect(try await user(plain, basic: "admin:admin").status == 200)
            try await plain.shutdown()
            // A certificate no trusted authority signed does not get through TLS.
            let stranger = try client(certificate: tls.strangerCertificateFile, key: tls.strangerKeyFile, http2: false)
            await #expect(throws: (any Error).self) { _ = try await user(stranger) }
            try await stranger.shutdown()
            // An administrator turns the registration off: the certificate stands for nobody (Basic counts again).
            let admin = try client(certificate: nil, key: nil, http2: false)
            var find = HTTPClientRequest(url: baseURL + "/api/now/table/sys_user_certificate?fingerprint=\(fingerprint)&sysparm_fields=sys_id")
            find.headers.add(name: "Authorization", value: "Basic " + Data("admin:admin".utf8).base64EncodedString())
            let found = try JSONValue.parse(Data((try await admin.execute(find, timeout: .seconds(20)).body.collect(upTo: 1 << 20)).readableBytesView))
            let id = try #require(found["result"]?.arrayValue?.first?["sys_id"]?.stringValue)
            var off = HTTPClientRequest(url: baseURL + "/api/now/table/sys_user_certificate/\(id)")
            off.method = .PATCH
            off.headers.add(name: "Authorization", value: "Basic " + Data("admin:admin".utf8).base64EncodedString())
            off.headers.add(name: "Content-Type", value: "application/json")
            off.body = .bytes(ByteBuffer(string: #"{"active":"false"}"#))
            #expect(try await admin.execute(off, timeout: .seconds(20)).status.code == 200)
            try await admin.shutdown()
            let revoked = try client(certificate: tls.clientCertificateFile, key: tls.clientKeyFile, http2: false)
            #expect(try await user(revoked).status == 401)
            try await revoked.shutdown()
        }
    }
}
