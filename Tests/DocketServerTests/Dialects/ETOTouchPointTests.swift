import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

/// ETO's `TouchPoint.svc`: forms with elements and choices, a participant's responses, adding and updating one, with
/// the checks a form makes, and nothing of one enterprise reaching the other.
@Suite("ETO TouchPoints")
struct ETOTouchPointTests {
    struct Form: Decodable {
        struct Element: Decodable {
            struct Choice: Decodable { var TouchPointElementChoiceID: Int; var ChoiceText: String }
            var ElementID: Int; var ElementType: Int; var Stimulus: String; var IsRequired: Bool; var ElementChoices: [Choice]
        }
        var TouchPointID: Int; var TouchPointName: String; var ElementCollection: [Element]
    }
    struct Listed: Decodable { var TouchPointID: Int; var TouchPointName: String }
    struct ResponseElement: Decodable {
        struct Choice: Decodable { var TouchPointElementChoiceID: Int }
        var ElementID: Int; var ElementType: Int; var Value: String?; var ResponseElementChoices: [Choice]?
    }
    struct TouchPointResponse: Decodable {
        var TouchPointResponseID: Int; var TouchPointID: Int; var SubjectID: Int; var ProgramID: Int; var ResponseCreatedDate: String?
        var ResponseElements: [ResponseElement]
    }
    struct Added: Decodable { var AddTouchPointResponseResult: TouchPointResponse }
    struct Updated: Decodable { var UpdateTouchPointResponseResult: TouchPointResponse }
    typealias Failure = ETOSecurityTests.Failure

    static let base = "/API/TouchPoint.svc/"

    static func answer(_ elements: String, subject: Int = 105_002, extra: String = "") -> String {
        #"{"TouchPointResponse":{"TouchPointID":301,"SubjectID":\#(subject),\#(extra)"ResponseElements":\#(elements)}}"#
    }

    @Test("forms and a participant's responses, as the enterprise's staff see them")
    func reads() async throws {
        try await TestApp.withRouter { client in
            let (_, _, john) = try await ETOSecurityTests.siteToken(client)
            let listed = try ETOSecurityTests.decode([Listed].self, try await client.get(Self.base + "ListTouchPoint", john))
            #expect(listed.map(\.TouchPointID) == [301])
            let form = try ETOSecurityTests.decode(Form.self, try await client.get(Self.base + "GetTouchPoint?TouchPointID=301&PopulateElementCollection=true", john))
            #expect(form.ElementCollection.map(\.ElementType) == [5, 4, 9])
            #expect(form.ElementCollection[1].ElementChoices.map(\.ChoiceText) == ["Street", "Vehicle", "Shelter"])
            _ = try ETOSecurityTests.decode(Failure.self, try await client.get(Self.base + "GetTouchPoint?TouchPointID=401", john), .notFound)
            _ = try ETOSecurityTests.decode(Failure.self, try await client.get(Self.base + "GetTouchPoint", john), .badRequest)
            let responses = try ETOSecurityTests.decode(
                [TouchPointResponse].self, try await client.get(Self.base + "ListTouchPointResponses?SubjectID=105001&TouchPointID=301", john)
            )
            #expect(responses.map(\.TouchPointResponseID) == [5001])
            #expect(responses.first?.ResponseElements.first { $0.ElementID == 2 }?.ResponseElementChoices?.first?.TouchPointElementChoiceID == 11)
            let one = try ETOSecurityTests.decode(
                TouchPointResponse.self, try await client.get(Self.base + "GetTouchPointResponse?TouchPointID=301&TouchPointResponseID=5001", john)
            )
            #expect(one.SubjectID == 105_001 && one.ProgramID == 1001)
            // The other enterprise: its form, its participant and its response are not there for john, and john's for abel.
            _ = try ETOSecurityTests.decode(Failure.self, try await client.get(Self.base + "ListTouchPointResponses?SubjectID=107001&TouchPointID=401", john), .notFound)
            let (_, _, abel) = try await ETOSecurityTests.siteToken(client, "abel.tuter@example.com", site: 201)
            #expect(try ETOSecurityTests.decode([Listed].self, try await client.get(Self.base + "ListTouchPoint", abel)).map(\.TouchPointID) == [401])
            _ = try ETOSecurityTests.decode(Failure.self, try await client.get(Self.base + "GetTouchPointResponse?TouchPointID=301&TouchPointResponseID=5001", abel), .notFound)
            #expect(try await client.get("/api/now/table/eto_response", .abel).results.count == 1)
        }
    }

    @Test("add a response (the session's program by default) and update part of it; the form's checks refuse bad answers")
    func writes() async throws {
        try await TestApp.withRouter { client in
            let (_, _, john) = try await ETOSecurityTests.siteToken(client)
            let good = #"[{"ElementID":1,"ElementType":5,"Value":"Checked in"},{"ElementID":2,"ElementType":4,"ResponseElementChoices":[{"TouchPointElementChoiceID":13}]},{"ElementID":3,"ElementType":9,"Value":"11/20/2026"}]"#
            // No program chosen and none given.
            let noProgram = try ETOSecurityTests.decode(Failure.self, try await ETOSecurityTests.post(client, Self.base + "TouchPointResponseAdd/", Self.answer(good), john), .badRequest)
            #expect(noProgram.Message.hasPrefix("NoProgramIDSelected"))
            #expect(try await ETOSecurityTests.post(client, "/API/Security.svc/UpdateCurrentProgram/", #"{"ProgramID":"1002"}"#, john).status == .ok)
            let added = try ETOSecurityTests.decode(Added.self, try await ETOSecurityTests.post(
                client, Self.base + "TouchPointResponseAdd/", Self.answer(good, extra: #""ResponseCreatedDate":"/Date(1790000000000)/","#), john
            )).AddTouchPointResponseResult
            #expect(added.TouchPointResponseID >= 10001)
            #expect(added.ProgramID == 1002 && added.SubjectID == 105_002)
            #expect(added.ResponseCreatedDate == "/Date(1790000000000)/")  // the moment given, its time of day kept
            let updated = try ETOSecurityTests.decode(Updated.self, try await ETOSecurityTests.post(
                client, Self.base + "TouchPointResponseUpdate/",
                #"{"TouchPointResponse":{"TouchPointID":301,"TouchPointResponseID":\#(added.TouchPointResponseID),"ResponseElements":[{"ElementID":1,"ElementType":5,"Value":"Left a voucher"}]}}"#,
                john
            )).UpdateTouchPointResponseResult
            #expect(updated.ResponseElements.count == 3)
            #expect(updated.ResponseElements.first { $0.ElementID == 1 }?.Value == "Left a voucher")
            #expect(updated.ResponseElements.first { $0.ElementID == 3 }?.Value == "11/20/2026")
            for body in [
                Self.answer(#"[{"ElementID":1,"ElementType":5,"Value":"only one"}]"#),
                Self.answer(#"[{"ElementID":1,"ElementType":5,"Value":"x"},{"ElementID":2,"ElementType":4,"ResponseElementChoices":[{"TouchPointElementChoiceID":21}]}]"#),
                Self.answer(#"[{"ElementID":1,"ElementType":5,"Value":"x"},{"ElementID":2,"ElementType":4,"ResponseElementChoices":[{"TouchPointElementChoiceID":11}]},{"ElementID":3,"ElementType":9,"Value":"31/31/2026"}]"#),
                Self.answer(#"[{"ElementID":99,"ElementType":5,"Value":"x"}]"#),
                Self.answer(#"[{"ElementID":1,"ElementType":5,"Value":"x"},{"ElementID":1,"ElementType":5,"Value":"y"}]"#),
                Self.answer(good, subject: 107_001), #"{"TouchPointResponse":"x"}"#, #"{"TouchPointResponse":{"SubjectID":105001}}"#,
            ] {
                let refused = try await ETOSecurityTests.post(client, Self.base + "TouchPointResponseAdd/", body, john)
                #expect([400, 404].contains(refused.status.code), "\(body): \(refused.text)")
            }
            // Only the one added response is new.
            #expect(try await client.get("/api/now/table/eto_response", .john).results.count == 2)
        }
    }

    @Test("responses added at once each get their own id, and all are listed", .timeLimit(.minutes(3)))
    func concurrentAdds() async throws {
        try await TestApp.withRouter { client in
            let (_, _, john) = try await ETOSecurityTests.siteToken(client)
            let ids = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<6 {
                    group.addTask {
                        let body = Self.answer(
                            #"[{"ElementID":1,"ElementType":5,"Value":"visit \#(index)"},{"ElementID":2,"ElementType":4,"ResponseElementChoices":[{"TouchPointElementChoiceID":12}]}]"#,
                            extra: #""ProgramID":1001,"#
                        )
                        return try ETOSecurityTests.decode(Added.self, try await ETOSecurityTests.post(client, Self.base + "TouchPointResponseAdd/", body, john))
                            .AddTouchPointResponseResult.TouchPointResponseID
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(ids).count == 6)
            let listed = try ETOSecurityTests.decode(
                [TouchPointResponse].self, try await client.get(Self.base + "ListTouchPointResponses?SubjectID=105002&TouchPointID=301", john)
            )
            #expect(Set(listed.map(\.TouchPointResponseID)) == Set(ids))
        }
    }
}
