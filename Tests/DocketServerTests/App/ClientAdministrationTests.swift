import Foundation
import Testing

@testable import DocketServer

@Suite("docketd clients and mobile-config")
struct ClientAdministrationTests {
    @Test("create registers public and confidential clients (a confidential one with a printed secret and, for client_credentials, its service account); list shows them; bad registrations are refused in words; delete removes one; mobile-config prints a public client's file")
    func lifecycle() async throws {
        let directory = TemporaryDirectory()
        let configuration = TestApp.configuration(dataDirectory: directory.path)
        try await buildApplication(configuration).test(.router) { _ in }
        let (app, none) = try await ClientAdministration.create(
            .init(clientID: "tasks-ios", isPublic: true, grantTypes: ["authorization_code", "refresh_token"], redirectURIs: ["com.example.tasks:/cb"]),
            in: configuration
        )
        #expect(app.isPublic && none == nil)
        let (robot, secret) = try await ClientAdministration.create(.init(clientID: "reports", grantTypes: ["client_credentials"]), in: configuration)
        #expect(!robot.isPublic)
        #expect((secret?.count ?? 0) >= 16)
        let listed = try await ClientAdministration.list(in: configuration)
        #expect(listed.contains { $0.clientID == "tasks-ios" && $0.redirectURIs == ["com.example.tasks:/cb"] })
        #expect(listed.contains { $0.clientID == "reports" && $0.grantTypes == ["client_credentials"] })
        for bad in [
            ClientAdministration.NewClient(clientID: "tasks-ios", isPublic: true),
            .init(clientID: "x y"),
            .init(clientID: "web", isPublic: true, grantTypes: ["authorization_code"]),
            .init(clientID: "web", grantTypes: ["implicit"]),
            .init(clientID: "web", isPublic: true, grantTypes: ["client_credentials"]),
            .init(clientID: "web", secret: "short"),
            .init(clientID: "web", grantTypes: ["authorization_code"], redirectURIs: ["https://app.example/cb#x"]),
            .init(clientID: String(repeating: "c", count: 30), grantTypes: ["client_credentials"]),
        ] {
            await #expect(throws: ClientAdministration.Failure.self) { try await ClientAdministration.create(bad, in: configuration) }
        }
        let file = try await ClientAdministration.mobileServices(clientID: "tasks-ios", base: "https://tasks.example.com", in: configuration)
        #expect(file.contains(#""resource" : "tasks-ios""#))
        await #expect(throws: ClientAdministration.Failure.self) {
            try await ClientAdministration.mobileServices(clientID: "reports", base: "https://tasks.example.com", in: configuration)
        }
        try await ClientAdministration.delete(clientID: "tasks-ios", in: configuration)
        #expect(try await !ClientAdministration.list(in: configuration).contains { $0.clientID == "tasks-ios" })
        await #expect(throws: ClientAdministration.Failure.self) { try await ClientAdministration.delete(clientID: "tasks-ios", in: configuration) }
    }
}
