import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing

@testable import DocketServer

/// ETO's authentication chain (`Security.svc`) and programs (`Form.svc`), as the Swift seed calls them, decoded as
/// strictly as a Codable client would; and the refusals: a wrong password, another enterprise's site, a token with the
/// wrong enterprise header, a disabled program.
@Suite("ETO Security.svc and programs")
struct ETOSecurityTests {
    struct AuthResult: Decodable {
        struct Result: Decodable {
            var AccessKey: String; var AuthStatusCode: Int; var Email: String; var MarketplaceId: Int; var SSOAuthToken: String
        }
        var SSOAuthenticateResult: Result
    }
    struct Enterprise: Decodable { var Key: String; var Value: String }
    struct Site: Decodable { var Key: Int; var Value: String }
    struct Program: Decodable { var ID: Int; var Name: String; var Disabled: Bool }
    struct Failure: Decodable { var Message: String }

    static let first = DemoContexts.enterprises[0].guid
    static let second = DemoContexts.enterprises[1].guid

    static func decode<T: Decodable>(
        _ type: T.Type, _ response: TestResponse, _ status: HTTPResponse.Status = .ok, _ source: SourceLocation = #_sourceLocation
    ) throws -> T {
        #expect(response.status == status, "\(response.text)", sourceLocation: source)
        return try JSONDecoder().decode(type, from: Data(response.body.readableBytesView))
    }

    static func post(_ client: any TestClientProtocol, _ path: String, _ body: String, _ headers: HTTPFields = [:]) async throws -> TestResponse {
        var headers = headers
        headers[.contentType] = "application/json"
        return try await client.execute(uri: path, method: .post, headers: headers, body: ByteBuffer(string: body))
    }

    static func ssoToken(_ client: any TestClientProtocol, _ email: String, _ password: String = "password") async throws -> String {
        let response = try await post(
            client, "/API/Security.svc/SSOAuthenticate/", #"{"security":{"Email":"\#(email)","Password":"\#(password)"}}"#
        )
        return try decode(AuthResult.self, response).SSOAuthenticateResult.SSOAuthToken
    }

    /// The seed's chain up to a site token: login, enterprises, sites, site login (offset in minutes).
    static func siteToken(_ client: any TestClientProtocol, _ email: String = "john.doe@example.com", site: Int = 101) async throws
        -> (sso: String, site: String, headers: HTTPFields)
    {
        let sso = try await ssoToken(client, email)
        let enterprises = try decode([Enterprise].self, try await client.get("/API/Security.svc/GetSSOEnterprises/\(sso)", [:]))
        let enterprise = try #require(enterprises.first)
        _ = try decode([Site].self, try await client.get("/API/Security.svc/GetSSOSites/\(sso)/\(enterprise.Key)", [:]))
        let login = try await client.get("/API/Security.svc/SSOSiteLogin/\(site)/\(enterprise.Key)/\(sso)/-300", [:])
        let token = try decode(String.self, login)
        return (sso, token, [HTTPField.Name("enterpriseGuid")!: enterprise.Key, HTTPField.Name("securityToken")!: token])
    }

    @Test("the seed's sequence: SSOAuthenticate, enterprises, sites, site login, programs, UpdateCurrentProgram with a string id")
    func seedSequence() async throws {
        try await TestApp.withRouter { client in
            let auth = try Self.decode(AuthResult.self, try await Self.post(
                client, "/API/Security.svc/SSOAuthenticate/", #"{"security":{"Email":"john.doe@example.com","Password":"password"}}"#
            ))
            let sso = auth.SSOAuthenticateResult.SSOAuthToken
            #expect(auth.SSOAuthenticateResult.AuthStatusCode == 0)
            #expect(sso != ETOAPI.zeroGUID && UUID(uuidString: sso) != nil)
            let enterprises = try Self.decode([Enterprise].self, try await client.get("/API/Security.svc/GetSSOEnterprises/\(sso)", [:]))
            #expect(enterprises.map(\.Value) == ["Docket Outreach"])
            #expect(enterprises.first?.Key == Self.first)
            let sites = try Self.decode([Site].self, try await client.get("/API/Security.svc/GetSSOSites/\(sso)/\(Self.first)", [:]))
            #expect(sites.map(\.Key) == [101, 102])
            // The seed sends secondsFromGMT / 60 (minutes); the answer is a bare JSON string.
            let login = try await client.get("/API/Security.svc/SSOSiteLogin/101/\(Self.first)/\(sso)/-300", [:])
            #expect(login.text.hasPrefix("\"") && login.text.hasSuffix("\""))
            let token = try Self.decode(String.self, login)
            let headers: HTTPFields = [HTTPField.Name("enterpriseGuid")!: Self.first, HTTPField.Name("securityToken")!: token]
            let programs = try Self.decode([Program].self, try await client.get("/API/Form.svc/Forms/Program/GetPrograms/101", headers))
            #expect(programs.map(\.ID) == [1001, 1002, 1003])
            #expect(programs.filter(\.Disabled).map(\.Name) == ["Winter Response 2019"])
            let chosen = try await Self.post(client, "/API/Security.svc/UpdateCurrentProgram/", #"{"ProgramID":"1001"}"#, headers)
            #expect(chosen.status == .ok)
            #expect(try chosen.json["ProgramName"]?.stringValue == "Street Outreach")
            // A number works as well, and paths match in any case.
            #expect(try await Self.post(client, "/api/security.svc/updatecurrentprogram/", #"{"ProgramID":1002}"#, headers).status == .ok)
            #expect(try await client.get("/api/FORM.svc/forms/program/getPrograms/101", headers).status == .ok)
        }
    }

    @Test("a wrong password or an unknown e-mail is 200 with the zero GUID and a non-zero AuthStatusCode")
    func failedLogin() async throws {
        try await TestApp.withRouter { client in
            for body in [#"{"security":{"Email":"john.doe@example.com","Password":"nope"}}"#,
                         #"{"security":{"Email":"nobody@example.com","Password":"password"}}"#] {
                let result = try Self.decode(AuthResult.self, try await Self.post(client, "/API/Security.svc/SSOAuthenticate/", body))
                #expect(result.SSOAuthenticateResult.SSOAuthToken == ETOAPI.zeroGUID)
                #expect(result.SSOAuthenticateResult.AccessKey == ETOAPI.zeroGUID)
                #expect(result.SSOAuthenticateResult.AuthStatusCode != 0)
            }
            // The zero GUID (or any other) is no SSO token.
            _ = try Self.decode(Failure.self, try await client.get("/API/Security.svc/GetSSOEnterprises/\(ETOAPI.zeroGUID)", [:]), .unauthorized)
            for bad in ["", "[]", "not json", #"{"security":{"Email":1}}"#] {
                _ = try Self.decode(Failure.self, try await Self.post(client, "/API/Security.svc/SSOAuthenticate/", bad), .badRequest)
            }
            _ = try Self.decode(Failure.self, try await client.get("/API/Security.svc/SSOAuthenticate/", [:]), .methodNotAllowed)
            _ = try Self.decode(Failure.self, try await client.get("/API/Security.svc/Nothing", [:]), .notFound)
        }
    }

    @Test("enterprises keep apart: another enterprise's sites, a site of another enterprise, a token with the wrong header")
    func isolation() async throws {
        try await TestApp.withRouter { client in
            let abel = try await Self.ssoToken(client, "abel.tuter@example.com")
            let abelEnterprises = try Self.decode([Enterprise].self, try await client.get("/API/Security.svc/GetSSOEnterprises/\(abel)", [:]))
            #expect(abelEnterprises.map(\.Key) == [Self.second])
            _ = try Self.decode(Failure.self, try await client.get("/API/Security.svc/GetSSOSites/\(abel)/\(Self.first)", [:]), .forbidden)
            // john is not staff of Harbor House, and site 102 is not a site of the second enterprise.
            let john = try await Self.ssoToken(client, "john.doe@example.com")
            _ = try Self.decode(Failure.self, try await client.get("/API/Security.svc/SSOSiteLogin/201/\(Self.second)/\(john)/0", [:]), .forbidden)
            let wrongPair = try Self.decode(Failure.self, try await client.get("/API/Security.svc/SSOSiteLogin/102/\(Self.second)/\(john)/0", [:]), .forbidden)
            #expect(wrongPair.Message.contains("not a site of enterprise"))
            _ = try Self.decode(Failure.self, try await client.get("/API/Security.svc/SSOSiteLogin/101/\(Self.first)/\(john)/99999", [:]), .badRequest)
            // A site token presented with another enterprise's GUID, or without headers, is refused.
            let (_, token, headers) = try await Self.siteToken(client)
            let wrongHeader: HTTPFields = [HTTPField.Name("enterpriseGuid")!: Self.second, HTTPField.Name("securityToken")!: token]
            let refused = try Self.decode(Failure.self, try await client.get("/API/Form.svc/Forms/Program/GetPrograms/101", wrongHeader), .unauthorized)
            #expect(refused.Message.contains("not for enterprise"))
            _ = try Self.decode(Failure.self, try await client.get("/API/Form.svc/Forms/Program/GetPrograms/101", [:]), .unauthorized)
            // Another site's programs, a disabled program, a program of another site.
            _ = try Self.decode(Failure.self, try await client.get("/API/Form.svc/Forms/Program/GetPrograms/102", headers), .forbidden)
            let disabled = try Self.decode(Failure.self, try await Self.post(client, "/API/Security.svc/UpdateCurrentProgram/", #"{"ProgramID":1003}"#, headers), .badRequest)
            #expect(disabled.Message.contains("disabled"))
            _ = try Self.decode(Failure.self, try await Self.post(client, "/API/Security.svc/UpdateCurrentProgram/", #"{"ProgramID":2001}"#, headers), .forbidden)
            _ = try Self.decode(Failure.self, try await Self.post(client, "/API/Security.svc/UpdateCurrentProgram/", #"{"ProgramID":"x"}"#, headers), .badRequest)
            // An SSO token is no site token, and the other way round.
            let (sso, _, _) = try await Self.siteToken(client)
            let ssoAsSite: HTTPFields = [HTTPField.Name("enterpriseGuid")!: Self.first, HTTPField.Name("securityToken")!: sso]
            _ = try Self.decode(Failure.self, try await client.get("/API/Form.svc/Forms/Program/GetPrograms/101", ssoAsSite), .unauthorized)
            _ = try Self.decode(Failure.self, try await client.get("/API/Security.svc/GetSSOEnterprises/\(token)", [:]), .unauthorized)
        }
    }

    struct Participant: Decodable {
        var ID: Int; var FirstName: String; var LastName: String; var DateOfBirth: String?; var SubjectID: Int; var SiteID: Int
    }

    @Test("participants: one by CLID and a search in a program, only of the token's site and enterprise")
    func participants() async throws {
        try await TestApp.withRouter { client in
            let (_, _, john) = try await Self.siteToken(client)
            let maria = try Self.decode(Participant.self, try await client.get("/API/Actor.svc/participant/5001", john))
            #expect(maria.FirstName == "Maria" && maria.LastName == "Lopez" && maria.SiteID == 101)
            #expect(maria.DateOfBirth == "/Date(447897600000)/")  // 1984-03-12, midnight UTC
            // Another site of the same enterprise, and another enterprise: not found.
            _ = try Self.decode(Failure.self, try await client.get("/API/Actor.svc/participant/5003", john), .notFound)
            _ = try Self.decode(Failure.self, try await client.get("/API/Actor.svc/participant/7001", john), .notFound)
            _ = try Self.decode(Failure.self, try await client.get("/API/Actor.svc/participant/x", john), .badRequest)
            let found = try Self.decode([Participant].self, try await client.get("/API/Search.svc/Search/1001/lo", john))
            #expect(found.map(\.ID) == [5001])
            // Only those enrolled in the program: James Carter (5002) is in Shelter Check-in (1002).
            #expect(try Self.decode([Participant].self, try await client.get("/API/Search.svc/Search/1001/a", john)).map(\.ID) == [5001])
            #expect(try Self.decode([Participant].self, try await client.get("/API/Search.svc/Search/1002/a", john)).map(\.ID) == [5002])
            _ = try Self.decode(Failure.self, try await client.get("/API/Search.svc/Search/2001/a", john), .forbidden)
            _ = try Self.decode(Failure.self, try await client.get("/API/Actor.svc/participant/5001", [:]), .unauthorized)
            // abel, in the other enterprise, finds his own and none of john's.
            let (_, _, abel) = try await Self.siteToken(client, "abel.tuter@example.com", site: 201)
            #expect(try Self.decode(Participant.self, try await client.get("/API/Actor.svc/participant/7001", abel)).LastName == "Becker")
            _ = try Self.decode(Failure.self, try await client.get("/API/Actor.svc/participant/5001", abel), .notFound)
            #expect(try Self.decode([Participant].self, try await client.get("/API/Search.svc/Search/2001/o", abel)).map(\.ID) == [7001, 7002])
        }
    }

    @Test("participants: add (numbered, in the token's enterprise), duplicate check, edit, refusals, many at once")
    func saveParticipants() async throws {
        try await TestApp.withRouter { client in
            let (_, _, john) = try await Self.siteToken(client)
            let path = "/API/Actor.svc/participant/"
            let added = try Self.decode(Participant.self, try await Self.post(
                client, path, #"{"participant":{"FirstName":"Nina","LastName":"Park","DateOfBirth":"/Date(631152000000)/","SiteID":101,"ProgramID":1001}}"#, john
            ))
            #expect(added.ID == 10001 && added.SiteID == 101)
            #expect(added.DateOfBirth == "/Date(631152000000)/")  // 1990-01-01
            // Added with a ProgramID: enrolled from today, so the program's search finds her at once.
            #expect(try Self.decode([Participant].self, try await client.get("/API/Search.svc/Search/1001/park", john)).map(\.ID) == [10001])
            let enrolled = try Self.decode([Enrollment].self, try await client.get("/API/Actor.svc/participant/enrollment/10001", john))
            #expect(enrolled.map(\.ProgramID) == [1001])
            // The id as a string, as the Swift client sends it.
            let second = try Self.decode(Participant.self, try await Self.post(
                client, path, #"{"participant":{"FirstName":"Omar","LastName":"Quist","ProgramID":"1002"}}"#, john
            ))
            #expect(try Self.decode([Participant].self, try await client.get("/API/Search.svc/Search/1002/quist", john)).map(\.ID) == [second.ID])
            // A program of another site, or a disabled one: refused, and nobody is added.
            for (program, status) in [("2001", HTTPResponse.Status.forbidden), ("1003", .badRequest)] {
                _ = try Self.decode(Failure.self, try await Self.post(
                    client, path, #"{"participant":{"FirstName":"Not","LastName":"Added","ProgramID":\#(program)}}"#, john
                ), status)
            }
            #expect(try await client.get("/api/now/table/eto_participant?sysparm_query=last_name%3DAdded", .admin).results.isEmpty)
            let duplicate = try Self.decode(Failure.self, try await Self.post(
                client, path, #"{"participant":{"FirstName":"Nina","LastName":"Park","DateOfBirth":"01/01/1990"}}"#, john
            ), .conflict)
            #expect(duplicate.Message.contains("10001"))
            let edited = try await Self.post(client, path, #"{"participant":{"ID":"10001","ZipCode":"94110"}}"#, john)
            #expect(try edited.json["ZipCode"]?.stringValue == "94110")
            #expect(try Self.decode(Participant.self, try await client.get("/API/Actor.svc/participant/10001", john)).LastName == "Park")
            // The new participant is a record of john's enterprise: the Table API shows it to him, not to abel.
            let rows = try await client.get("/api/now/table/eto_participant?sysparm_query=number%3D10001&sysparm_fields=sys_domain", .john).results
            #expect(rows.first?["sys_domain"]?["value"]?.stringValue == DemoData.id("sys_enterprise", 1))
            #expect(try await client.get("/api/now/table/eto_participant?sysparm_query=number%3D10001", .abel).results.isEmpty)
            // Refusals.
            for (body, status) in [
                (#"{"participant":{"FirstName":"A","LastName":"B","SiteID":102}}"#, HTTPResponse.Status.forbidden),
                (#"{"participant":{"FirstName":"A"}}"#, .badRequest),
                (#"{"participant":{"FirstName":"A","LastName":"B","DateOfBirth":"02/30/1990"}}"#, .badRequest),
                (#"{"participant":{"ID":7001,"ZipCode":"1"}}"#, .notFound),
                (#"{"participant":{"ID":"x"}}"#, .badRequest),
                (#"{"participant":"x"}"#, .badRequest),
            ] {
                _ = try Self.decode(Failure.self, try await Self.post(client, path, body, john), status)
            }
            // Many at once: each gets its own number.
            let ids = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<6 {
                    group.addTask {
                        try Self.decode(Participant.self, try await Self.post(
                            client, path, #"{"participant":{"FirstName":"Many","LastName":"Person\#(index)"}}"#, john
                        )).ID
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(ids).count == 6)
            // The same person added six times at once: added once, the others refused naming them.
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        try await Self.post(
                            client, path, #"{"participant":{"FirstName":"Twin","LastName":"Once","DateOfBirth":"1991-02-03"}}"#, john
                        ).status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .ok }.count == 1, "\(statuses)")
            #expect(statuses.filter { $0 == .conflict }.count == 5, "\(statuses)")
            #expect(try await client.get("/api/now/table/eto_participant?sysparm_query=last_name%3DOnce", .admin).results.count == 1)
        }
    }

    struct Enrollment: Decodable {
        var ID: Int; var ParticipantID: Int; var ProgramID: Int; var ProgramName: String; var StartDate: String?
        var ProjectedEndDate: String?
    }
    struct SavedEnrollment: Decodable {
        struct Result: Decodable { var ID: Int }
        var SaveParticipantEnrollmentResult: Result
    }

    @Test("enrollments: list a participant's, enroll in a program of the site; disabled and foreign programs refused")
    func enrollments() async throws {
        try await TestApp.withRouter { client in
            let (_, _, john) = try await Self.siteToken(client)
            let listed = try Self.decode([Enrollment].self, try await client.get("/API/Actor.svc/participant/enrollment/5001", john))
            #expect(listed.map(\.ProgramID) == [1001])
            #expect(listed.first?.ProgramName == "Street Outreach")
            #expect(listed.first?.ProjectedEndDate == nil)
            let saved = try Self.decode(SavedEnrollment.self, try await Self.post(
                client, "/API/Actor.svc/participant/enrollment/",
                #"{"participantID":5001,"programID":"1002","startDate":"/Date(1790000000000)/","projectedEndDate":null}"#, john
            ))
            #expect(saved.SaveParticipantEnrollmentResult.ID >= 101)
            let after = try Self.decode([Enrollment].self, try await client.get("/API/Actor.svc/participant/enrollment/5001", john))
            #expect(Set(after.map(\.ProgramID)) == [1001, 1002])
            #expect(after.first?.ID == saved.SaveParticipantEnrollmentResult.ID)
            // Now Maria is found in Shelter Check-in too.
            #expect(try Self.decode([Participant].self, try await client.get("/API/Search.svc/Search/1002/lopez", john)).map(\.ID) == [5001])
            for (body, status) in [
                (#"{"participantID":5001,"programID":1003,"startDate":"/Date(1790000000000)/"}"#, HTTPResponse.Status.badRequest),
                (#"{"participantID":5001,"programID":2001,"startDate":"/Date(1790000000000)/"}"#, .forbidden),
                (#"{"participantID":7001,"programID":1001,"startDate":"/Date(1790000000000)/"}"#, .notFound),
                (#"{"participantID":5001,"programID":1001}"#, .badRequest),
                (#"{"participantID":"x","programID":1001,"startDate":"/Date(0)/"}"#, .badRequest),
            ] {
                _ = try Self.decode(Failure.self, try await Self.post(client, "/API/Actor.svc/participant/enrollment/", body, john), status)
            }
            _ = try Self.decode(Failure.self, try await client.get("/API/Actor.svc/participant/enrollment/7001", john), .notFound)
            // abel sees none of it.
            #expect(try await client.get("/api/now/table/eto_enrollment", .abel).results.count == 2)
            #expect(try await client.get("/api/now/table/eto_enrollment", .john).results.count == 4)
        }
    }

    @Test("extreme dates and ids, given or stored, are refused or shown as null, never a crash")
    func extremes() async throws {
        try await TestApp.withRouter { client in
            let (_, _, john) = try await Self.siteToken(client)
            for born in ["/Date(-9223372036854775808)/", "/Date(9223372036854775807)/", "99999999999-01-01", "01/9223372036854775807/2000"] {
                let body = #"{"participant":{"FirstName":"Ext","LastName":"Reme","DateOfBirth":"\#(born)"}}"#
                _ = try Self.decode(Failure.self, try await Self.post(client, "/API/Actor.svc/participant/", body, john), .badRequest)
            }
            // Values an administrator stored through the Table API.
            let stored = try await client.send(
                .patch, "/api/now/table/eto_participant/\(DemoData.id("eto_participant", 5002))",
                json: #"{"date_of_birth":"99999999999-1-1","number":"9223372036854775807"}"#, headers: .admin
            )
            #expect(stored.status == .ok)
            let odd = try Self.decode(Participant.self, try await client.get("/API/Actor.svc/participant/9223372036854775807", john))
            #expect(odd.DateOfBirth == nil && odd.SubjectID == 0)
        }
    }

    @Test("a password change ends the user's ETO tokens")
    func passwordChangeEndsTokens() async throws {
        try await TestApp.withRouter { client in
            let (sso, _, headers) = try await Self.siteToken(client, "beth.anglin@example.com")
            let patched = try await client.send(
                .patch, "/api/now/table/sys_user/\(DemoData.userID("beth.anglin"))", json: #"{"password":"changed-password"}"#, headers: .admin
            )
            #expect(patched.status == .ok)
            _ = try Self.decode(Failure.self, try await client.get("/API/Security.svc/GetSSOEnterprises/\(sso)", [:]), .unauthorized)
            _ = try Self.decode(Failure.self, try await client.get("/API/Form.svc/Forms/Program/GetPrograms/101", headers), .unauthorized)
        }
    }

    @Test("many site logins and program changes at once: each gets its own token, and every token holds")
    func concurrentSessions() async throws {
        try await TestApp.withRouter { client in
            let sso = try await Self.ssoToken(client, "john.doe@example.com")
            let tokens = try await withThrowingTaskGroup(of: (String, Int).self) { group in
                for index in 0..<8 {
                    group.addTask {
                        let token = try Self.decode(String.self, try await client.get("/API/Security.svc/SSOSiteLogin/101/\(Self.first)/\(sso)/0", [:]))
                        let program = index % 2 == 0 ? 1001 : 1002
                        let headers: HTTPFields = [HTTPField.Name("enterpriseGuid")!: Self.first, HTTPField.Name("securityToken")!: token]
                        #expect(try await Self.post(client, "/API/Security.svc/UpdateCurrentProgram/", #"{"ProgramID":\#(program)}"#, headers).status == .ok)
                        return (token, program)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(tokens.map(\.0)).count == 8)
            for (token, _) in tokens {
                let headers: HTTPFields = [HTTPField.Name("enterpriseGuid")!: Self.first, HTTPField.Name("securityToken")!: token]
                #expect(try await client.get("/API/Form.svc/Forms/Program/GetPrograms/101", headers).status == .ok)
            }
        }
    }

    @Test("context sessions: a site token keeps its enterprise, site and program; kinds do not mix; ended sessions go")
    func contextSessions() async throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let storage = try await TestDatabase.open(sqlitePath: directory.path + "/t.sqlite", readers: 2)
        let hasher = PasswordHasher(cost: 4)
        let store = try await RecordStore.open(storage: storage, logger: Logger(label: "t"), hashPassword: hasher.hash).store
        let user = try await store.insert(into: "sys_user", values: ["user_name": "eto.user"], caller: .system)
        let sessions = ContextSessions(storage: storage)
        // A session starts only for a user who may sign in.
        #expect(try await sessions.start(.init(kind: .site, userID: "no-such-user", enterprise: Self.first, site: 101, program: 0, utcOffset: 0)) == nil)
        let site = try #require(
            try await sessions.start(.init(kind: .site, userID: user, enterprise: Self.first, site: 101, program: 0, utcOffset: -300)))
        try await sessions.setProgram(site.uppercased(), program: 1002)
        let loaded = try #require(try await sessions.load(site.uppercased(), kind: .site))
        #expect(loaded == .init(kind: .site, userID: user, enterprise: Self.first, site: 101, program: 1002, utcOffset: -300))
        #expect(try await sessions.load(site, kind: .sso) == nil)
        #expect(try await sessions.load(site, kind: .site, now: SessionStore.now() + ContextSessions.lifetime + 1) == nil)
        try await sessions.sessions.delete(site)
        #expect(try await sessions.load(site, kind: .site) == nil)
        try await sessions.prune()
        #expect(try await storage.read { db in try await db.rows("SELECT kind FROM docket_context") }.isEmpty)
        try await storage.close()
        await hasher.shutdown()
    }
}
