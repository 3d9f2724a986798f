import DocketModel
import Foundation
import Hummingbird

/// ETO's `TouchPoint.svc`: forms (``ContextSchema/touchpoint``) and responses about participants
/// (``ContextSchema/response``), read and written as the site token's user with its enterprise active.
extension ETOAPI {
    struct Element {
        var id: Int
        var type: Int
        var stimulus: String
        var required: Bool
        var choices: [(Int, String)]
    }

    /// `GET ListTouchPoint`: the enterprise's TouchPoints.
    func listTouchPoints(request: Request) async throws -> Response {
        let session = try await siteSession(request)
        let rows = try await store.list(
            RecordQuery(table: "eto_touchpoint", query: EncodedQuery().orderBy("number"), fields: ["number", "name"], limit: 1000, count: false),
            caller: session.caller
        ).records
        return Response.json(.array(rows.map {
            JSONValue(members: [("TouchPointID", .integer(Int($0["number"]) ?? 0)), ("TouchPointName", .string($0["name"]))])
        }))
    }

    /// `GET GetTouchPoint?TouchPointID=&PopulateElementCollection=true`: one form, with its elements and choices.
    func getTouchPoint(request: Request) async throws -> Response {
        let session = try await siteSession(request)
        let (record, elements) = try await touchPoint(try Self.query(request, "TouchPointID"), session: session)
        var members: [(String, JSONValue)] = [
            ("TouchPointID", .integer(Int(record["number"]) ?? 0)), ("TouchPointName", .string(record["name"])),
        ]
        if request.uri.queryParameters.get("PopulateElementCollection")?.lowercased() != "false" {
            members.append(("ElementCollection", .array(elements.map { element in
                JSONValue(members: [
                    ("ElementID", .integer(element.id)), ("ElementType", .integer(element.type)),
                    ("Stimulus", .string(element.stimulus)), ("IsRequired", .bool(element.required)),
                    ("ElementChoices", .array(element.choices.map {
                        JSONValue(members: [("TouchPointElementChoiceID", .integer($0.0)), ("ChoiceText", .string($0.1))])
                    })),
                ])
            })))
        }
        return Response.json(JSONValue(members: members))
    }

    /// `GET ListTouchPointResponses?SubjectID=&TouchPointID=`: a participant's responses to one form, newest first.
    func listResponses(request: Request) async throws -> Response {
        let session = try await siteSession(request)
        let participant = try await participant(subject: try Self.query(request, "SubjectID"), session: session)
        let (form, _) = try await touchPoint(try Self.query(request, "TouchPointID"), session: session)
        let rows = try await responses(
            EncodedQuery().and("participant", .equals, participant.sysID).and("touchpoint", .equals, form.sysID)
                .orderBy("response_date", descending: true).orderBy("number", descending: true),
            session: session
        )
        return Response.json(.array(rows.map { Self.responseJSON($0, subject: participant) }))
    }

    /// `GET GetTouchPointResponse?TouchPointID=&TouchPointResponseID=`.
    func getResponse(request: Request) async throws -> Response {
        let session = try await siteSession(request)
        let (form, _) = try await touchPoint(try Self.query(request, "TouchPointID"), session: session)
        let id = try Self.query(request, "TouchPointResponseID")
        guard let row = try await responses(
            EncodedQuery().and("number", .equals, String(id)).and("touchpoint", .equals, form.sysID), session: session
        ).first else { throw ETOError(.notFound, "No response \(id) to TouchPoint \(form["number"])") }
        let participant = try await participant(number: row["participant.number"], session: session)
        return Response.json(Self.responseJSON(row, subject: participant))
    }

    /// `POST TouchPointResponseAdd/` or `TouchPointResponseUpdate/` `{"TouchPointResponse": {…}}`.
    func saveResponse(_ request: Request, context: Context, update: Bool) async throws -> Response {
        let session = try await siteSession(request)
        let body = try await Self.body(request, context: context)
        guard let response = body["TouchPointResponse"], response.objectValue != nil else {
            throw ETOError(.badRequest, "Send {\"TouchPointResponse\": {TouchPointID, SubjectID, ResponseElements, …}}")
        }
        func number(_ key: String) throws -> Int? {
            guard let raw = response[key], raw != .null else { return nil }
            guard let value = raw.intValue ?? raw.stringValue.flatMap({ Int($0) }) else { throw ETOError(.badRequest, "\(key) must be a number") }
            return value
        }
        guard let formID = try number("TouchPointID") else { throw ETOError(.badRequest, "TouchPointID is needed") }
        let (form, elements) = try await touchPoint(formID, session: session)
        let caller = session.caller
        var values: [String: String] = [:]
        var given: [JSONValue]? = nil
        if let elementsJSON = response["ResponseElements"], elementsJSON != .null {
            given = try Self.answers(elementsJSON, elements: elements, complete: !update)
            values["answers"] = Self.text(.array(given ?? []))
        } else if !update {
            throw ETOError(.badRequest, "ResponseElements are needed")
        }
        if let date = response["ResponseCreatedDate"], date != .null {
            guard let text = date.stringValue, let moment = Self.dateTime(text) else {
                throw ETOError(.badRequest, "ResponseCreatedDate must be /Date(ms)/, MM/dd/yyyy or yyyy-MM-dd")
            }
            values["response_date"] = moment
        }
        let sysID: String
        let participant: Record
        if update {
            guard let id = try number("TouchPointResponseID") else { throw ETOError(.badRequest, "TouchPointResponseID is needed") }
            guard let existing = try await responses(
                EncodedQuery().and("number", .equals, String(id)).and("touchpoint", .equals, form.sysID), session: session
            ).first else { throw ETOError(.notFound, "No response \(id) to TouchPoint \(formID)") }
            participant = try await self.participant(number: existing["participant.number"], session: session)
            if let given {
                // The given elements replace those of the same ElementID; the others stay.
                let ids = Set(given.compactMap { $0["ElementID"]?.intValue })
                let kept = ((try? JSONValue.parse(Array(existing["answers"].utf8)))?.arrayValue ?? [])
                    .filter { !ids.contains($0["ElementID"]?.intValue ?? -1) }
                values["answers"] = Self.text(.array(kept + given))
            }
            sysID = try await store.update(existing.sysID, in: "eto_response", values: values, caller: caller)
        } else {
            guard let subject = try number("SubjectID") else { throw ETOError(.badRequest, "SubjectID is needed") }
            participant = try await self.participant(subject: subject, session: session)
            // The program: the body's, else the session's current one (ETO's default).
            guard let programID = try number("ProgramID") ?? (session.program > 0 ? session.program : nil) else {
                throw ETOError(.badRequest, "NoProgramIDSelected: send ProgramID or choose one with UpdateCurrentProgram")
            }
            guard let program = try await programs(ofSite: session.site).first(where: { $0.number == programID }), !program.disabled else {
                throw ETOError(.forbidden, "Program \(programID) is not an enabled program of site \(session.site)")
            }
            values["touchpoint"] = form.sysID
            values["participant"] = participant.sysID
            values["program"] = try await programSysID(program.number)
            if values["response_date"] == nil { values["response_date"] = GlideDateTime.format(Date()) }
            sysID = try await store.insert(into: "eto_response", values: values, caller: caller)
        }
        guard let saved = try await responses(EncodedQuery().and("sys_id", .equals, sysID), session: session).first else {
            throw ETOError(.notFound, "The response is not readable")
        }
        let result = Self.responseJSON(saved, subject: participant)
        return Response.json(JSONValue(members: [(update ? "UpdateTouchPointResponseResult" : "AddTouchPointResponseResult", result)]))
    }

    // MARK: Helpers

    static func query(_ request: Request, _ name: String) throws -> Int {
        let parameters = request.uri.queryParameters
        let value = parameters.first { $0.key.lowercased() == name.lowercased() }.map { String($0.value) }
        guard let value, let number = Int(value) else { throw ETOError(.badRequest, "\(name) is needed, as a number") }
        return number
    }

    /// A form of the enterprise by its TouchPointID, with its elements.
    private func touchPoint(_ id: Int, session: SiteLogin) async throws -> (Record, [Element]) {
        guard let record = try await store.list(
            RecordQuery(table: "eto_touchpoint", query: EncodedQuery().and("number", .equals, String(id)), fields: ["number", "name", "elements"], limit: 1, count: false),
            caller: session.caller
        ).records.first else { throw ETOError(.notFound, "No TouchPoint \(id)") }
        let list = (try? JSONValue.parse(Array(record["elements"].utf8)))?.arrayValue ?? []
        let elements = list.compactMap { item -> Element? in
            guard let id = item["ElementID"]?.intValue, let type = item["ElementType"]?.intValue else { return nil }
            let choices = (item["Choices"]?.arrayValue ?? []).compactMap { choice -> (Int, String)? in
                guard let id = choice["TouchPointElementChoiceID"]?.intValue else { return nil }
                return (id, choice["ChoiceText"]?.stringValue ?? "")
            }
            return Element(id: id, type: type, stimulus: item["Stimulus"]?.stringValue ?? "", required: item["IsRequired"] == .bool(true), choices: choices)
        }
        return (record, elements)
    }

    /// A participant of the token's site by SubjectID.
    private func participant(subject: Int, session: SiteLogin) async throws -> Record {
        guard subject > 100_000 else { throw ETOError(.notFound, "No participant with SubjectID \(subject) at site \(session.site)") }
        return try await participant(number: String(subject - 100_000), session: session)
    }

    private func responses(_ query: EncodedQuery, session: SiteLogin) async throws -> [Record] {
        try await store.list(
            RecordQuery(
                table: "eto_response", query: query.and("participant.site.number", .equals, String(session.site)),
                fields: ["number", "touchpoint.number", "participant.number", "program.number", "program.name", "response_date",
                         "answers", "sys_created_by", "sys_updated_on"],
                limit: 500, count: false
            ),
            caller: session.caller
        ).records
    }

    /// Checks response elements against the form (each element of it, once; a choice of the element for type 4; a
    /// date for type 9; text at most 4000 characters) and returns them as they are stored. `complete`: every
    /// required element must be there.
    static func answers(_ json: JSONValue, elements: [Element], complete: Bool) throws -> [JSONValue] {
        guard let items = json.arrayValue, items.count <= 200 else { throw ETOError(.badRequest, "ResponseElements must be a list") }
        var seen = Set<Int>()
        var stored: [JSONValue] = []
        for item in items {
            guard let id = item["ElementID"]?.intValue ?? item["ElementID"]?.stringValue.flatMap({ Int($0) }),
                let element = elements.first(where: { $0.id == id })
            else { throw ETOError(.badRequest, "ResponseElements: no element \(item["ElementID"].map { String(decoding: $0.serialized(), as: UTF8.self) } ?? "") in this TouchPoint") }
            guard seen.insert(id).inserted else { throw ETOError(.badRequest, "ResponseElements: element \(id) is given twice") }
            var members: [(String, JSONValue)] = [("ElementID", .integer(id)), ("ElementType", .integer(element.type))]
            switch element.type {
            case 4:
                let chosen = (item["ResponseElementChoices"]?.arrayValue ?? []).compactMap { $0["TouchPointElementChoiceID"]?.intValue }
                guard chosen.count == 1, element.choices.contains(where: { $0.0 == chosen[0] }) else {
                    throw ETOError(.badRequest, "Element \(id) (\(element.stimulus)) needs one of its choices")
                }
                members.append(("ResponseElementChoices", .array([JSONValue(members: [("TouchPointElementChoiceID", .integer(chosen[0]))])])))
            case 9:
                guard let text = item["Value"]?.stringValue, let day = date(text) else {
                    throw ETOError(.badRequest, "Element \(id) (\(element.stimulus)) needs a date (MM/dd/yyyy)")
                }
                let parts = day.split(separator: "-")
                members.append(("Value", .string("\(parts[1])/\(parts[2])/\(parts[0])")))
            default:
                guard let text = item["Value"]?.stringValue ?? item["Value"]?.intValue.map(String.init), text.count <= 4000 else {
                    throw ETOError(.badRequest, "Element \(id) (\(element.stimulus)) needs a value (at most 4000 characters)")
                }
                members.append(("Value", .string(text)))
            }
            stored.append(JSONValue(members: members))
        }
        if complete, let missing = elements.first(where: { $0.required && !seen.contains($0.id) }) {
            throw ETOError(.badRequest, "Element \(missing.id) (\(missing.stimulus)) is required")
        }
        return stored
    }

    static func text(_ value: JSONValue) -> String { String(decoding: value.serialized(), as: UTF8.self) }

    static func responseJSON(_ row: Record, subject participant: Record) -> JSONValue {
        let elements = (try? JSONValue.parse(Array(row["answers"].utf8))) ?? .array([])
        return JSONValue(members: [
            ("TouchPointResponseID", .integer(Int(row["number"]) ?? 0)), ("TouchPointID", .integer(Int(row["touchpoint.number"]) ?? 0)),
            ("SubjectID", .integer(subjectID(of: Int(participant["number"]) ?? 0))), ("SubjectTypeID", .integer(1)),
            ("ProgramID", .integer(Int(row["program.number"]) ?? 0)), ("ProgramName", .string(row["program.name"])),
            ("ResponseCreatedDate", dotNetDateTime(row["response_date"])), ("DataEnteredBy", .string(row["sys_created_by"])),
            ("AuditDate", dotNetDate(String(row["sys_updated_on"].prefix(10)))), ("ResponseElements", elements),
        ])
    }
}
