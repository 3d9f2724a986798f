@testable import DocketKit
import Foundation
import Testing

@Suite("mobile-services.json")
struct MobileServicesTests {
    @Test("decodes tolerantly: version as number or string, services without id, variantId or variantID; finds sync and the OpenID issuer")
    func tolerant() throws {
        let file = """
            {"version": "1.0", "clientId": "tasks-ios", "services": [
              {"name": "sync-app", "type": "SYNC-APP", "url": "https://tasks.example.com/graphql"},
              {"id": "a2", "type": "keycloak", "url": "https://sso.example.com/auth",
               "config": {"auth-server-url": "https://sso.example.com/auth/", "realm": "tasks", "resource": "tasks-ios",
                          "public-client": true, "confidential-port": 0}},
              {"id": "a3", "type": "push", "url": "https://push.example.com",
               "config": {"ios": {"variantID": "v1", "variantSecret": "s1"}, "web_push": {"variantId": "v2", "variantSecret": "s2", "appServerKey": "k"}}}
            ]}
            """
        let configuration = try MobileServicesConfiguration.decode(Data(file.utf8))
        #expect(configuration.version == "1.0" && configuration.clientID == "tasks-ios")
        #expect(configuration.sync?.http.absoluteString == "https://tasks.example.com/graphql")
        #expect(configuration.sync?.webSocket.absoluteString == "wss://tasks.example.com/graphql")
        #expect(configuration.openID?.issuer.absoluteString == "https://sso.example.com/auth/realms/tasks")
        #expect(configuration.openID?.clientID == "tasks-ios")
        #expect(configuration.service("keycloak")?.config["public-client"] == "true")
        let push = try #require(configuration.service("push"))
        #expect(push.variants["ios"]?.variantID == "v1" && push.variants["web_push"]?.appServerKey == "k")
        let numbered = try MobileServicesConfiguration.decode(Data(#"{"version": 1, "services": []}"#.utf8))
        #expect(numbered.version == "1")
        #expect(throws: (any Error).self) { try MobileServicesConfiguration.decode(Data(#"{"version": 1}"#.utf8)) }
    }
}
