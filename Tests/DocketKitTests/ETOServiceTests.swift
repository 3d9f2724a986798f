import DocketKit
import DocketModel
import DocketTestSupport
import Foundation
import Testing

/// `ETOService` against a live docketd: the context chain, the errors that name what is missing, and a saved context
/// used again without the password.
@Suite("ETOService against docketd")
struct ETOServiceTests {
    static func client(_ base: String, _ login: ETOLogin) throws -> DocketClient {
        try DocketClient(instance: base, credentials: .eto(login))
    }

    @Test("sign in, enterprises, sites, site, programs, program; the saved context works in a new client")
    func chain() async throws {
        try await withLiveServer { base in
            let client = try Self.client(base, ETOLogin(email: "john.doe@example.com"))
            let eto = client.eto
            // Each step before its time names what is missing.
            await #expect { try await eto.enterprises() } throws: { ($0 as? DocketError)?.message.hasPrefix("NoSSOAuthToken") == true }
            try await eto.signIn(email: "john.doe@example.com", password: "password")
            await #expect { try await eto.programs() } throws: { ($0 as? DocketError)?.message.hasPrefix("NoEnterpriseIDSelected") == true }
            await #expect { try await eto.selectedProgram() } throws: { ($0 as? DocketError)?.message.hasPrefix("NoEnterpriseIDSelected") == true }
            let enterprises = try await eto.enterprises()
            #expect(enterprises.map(\.name) == ["Docket Outreach"])
            let sites = try await eto.sites(enterprise: enterprises[0].id)
            #expect(sites.map(\.id) == [101, 102])
            try await eto.selectSite(101, enterprise: enterprises[0].id)
            await #expect { try await eto.selectedProgram() } throws: { ($0 as? DocketError)?.message.hasPrefix("NoProgramIDSelected") == true }
            let programs = try await eto.programs()
            #expect(programs.map(\.id) == [1001, 1002, 1003])
            #expect(programs.filter(\.disabled).map(\.id) == [1003])
            await #expect { try await eto.selectProgram(1003) } throws: { ($0 as? DocketError)?.status == 400 }
            try await eto.selectProgram(1002)
            #expect(try await eto.selectedProgram() == 1002)
            // The context as saved (no password in it) works for a new client.
            let saved = try #require(await client.session.etoLogin)
            #expect(saved.site == 101 && saved.program == 1002 && saved.siteToken != nil)
            let again = try Self.client(base, saved).eto
            #expect(try await again.programs().count == 3)
            #expect(try await again.selectedProgram() == 1002)
        }
    }

    @Test("a wrong password is a 401; a site of another enterprise is refused")
    func refusals() async throws {
        try await withLiveServer { base in
            let eto = try Self.client(base, ETOLogin(email: "john.doe@example.com")).eto
            await #expect { try await eto.signIn(email: "john.doe@example.com", password: "nope") } throws: {
                ($0 as? DocketError)?.status == 401
            }
            try await eto.signIn(email: "john.doe@example.com", password: "password")
            await #expect { try await eto.selectSite(201, enterprise: "c56a4180-65aa-42ec-a945-5fd21dec0538") } throws: {
                ($0 as? DocketError)?.status == 403
            }
            #expect(try await eto.sites(enterprise: "7c9e6679-7425-40de-944b-e07fc1f90ae7").count == 2)
        }
    }

    @Test("participants and TouchPoints in the chosen program: search, show, forms, a response")
    func participantsAndTouchPoints() async throws {
        try await withLiveServer { base in
            let eto = try Self.client(base, ETOLogin(email: "john.doe@example.com")).eto
            try await eto.signIn(email: "john.doe@example.com", password: "password")
            try await eto.selectSite(101, enterprise: "7c9e6679-7425-40de-944b-e07fc1f90ae7")
            await #expect { try await eto.searchParticipants("a") } throws: { ($0 as? DocketError)?.message.hasPrefix("NoProgramIDSelected") == true }
            try await eto.selectProgram(1001)
            let found = try await eto.searchParticipants("lo")
            #expect(found.map(\.id) == [5001])
            let maria = try await eto.participant(5001)
            #expect(maria.dateOfBirth == "1984-03-12" && maria.subjectID == 105_001)
            await #expect { try await eto.participant(7001) } throws: { ($0 as? DocketError)?.status == 404 }
            let forms = try await eto.touchPoints()
            #expect(forms.map(\.name) == ["Street Outreach Contact"])
            let form = forms[0]
            let id = try await eto.addResponse(to: form, participant: maria, answers: [1: "Brought a sleeping bag", 2: "vehicle", 3: "11/21/2026"])
            #expect(id >= 10001)
            await #expect { try await eto.addResponse(to: form, participant: maria, answers: [1: "x", 2: "boat"]) } throws: {
                ($0 as? DocketError)?.message.contains("not a choice") == true
            }
            // A required element left out: the server names it.
            await #expect { try await eto.addResponse(to: form, participant: maria, answers: [1: "x"]) } throws: {
                ($0 as? DocketError)?.message.contains("Sleeping location") == true
            }
        }
    }

    @Test("WorkBackend over ETO: show, create and edit participants; the rest says it does not apply")
    func backend() async throws {
        try await withLiveServer { base in
            let client = try Self.client(base, ETOLogin(email: "john.doe@example.com"))
            try await client.eto.signIn(email: "john.doe@example.com", password: "password")
            try await client.eto.selectSite(101, enterprise: "7c9e6679-7425-40de-944b-e07fc1f90ae7")
            let backend = client.workBackend()
            #expect(backend is ETOBackend)
            let maria = try await backend.item("5001")
            #expect(maria.title == "Maria Lopez" && maria.type == "participant" && maria.fields["DateOfBirth"] == "1984-03-12")
            let created = try await backend.create(type: "participant", fields: [("FirstName", "Ana"), ("LastName", "Ruiz"), ("DateOfBirth", "02/03/1995")])
            #expect(created.id == "10001" && created.fields["DateOfBirth"] == "1995-02-03")
            #expect(try await backend.edit(created.id, fields: [("lastname", "Ruiz Soto")]).title == "Ana Ruiz Soto")
            await #expect { try await backend.edit(created.id, fields: [("Nope", "x")]) } throws: { ($0 as? DocketError)?.kind == .invalidRequest }
            await #expect { try await backend.create(type: "defect", fields: []) } throws: { ($0 as? DocketError)?.kind == .invalidRequest }
            await #expect { try await backend.myItems(type: nil) } throws: { ($0 as? DocketError)?.message.hasPrefix("ETO has no") == true }
            await #expect { try await backend.delete("5001") } throws: { ($0 as? DocketError)?.message.hasPrefix("ETO has no") == true }
            await #expect { try await backend.item("7001") } throws: { ($0 as? DocketError)?.status == 404 }
        }
    }
}
