import DocketModel
import Foundation
import Hummingbird

/// ETO's participant reads: `Actor.svc/participant/{CLID}` and `Search.svc/Search/{ProgramID}/{term}`. They run as
/// the site token's user with the token's enterprise active, so the engine's scoping holds; ETO's partition by site
/// is added here (a participant of another site of the same enterprise is not found).
extension ETOAPI {
    /// `GET Actor.svc/participant/{CLID}`.
    func participant(_ clid: String, request: Request) async throws -> Response {
        let session = try await siteSession(request)
        guard let number = Int(clid), number > 0 else { throw ETOError(.badRequest, "The participant id (CLID) must be a number") }
        let found = try await participants(
            EncodedQuery().and("number", .equals, String(number)), session: session, limit: 1
        )
        guard let record = found.first else { throw ETOError(.notFound, "No participant \(number) at site \(session.site)") }
        return Response.json(Self.participantJSON(record, site: session.site))
    }

    /// `GET Search.svc/Search/{ProgramID}/{term}`: the participants enrolled in the program (one of the token's site)
    /// whose first or last name contains `term`.
    func search(program: String, term: String, request: Request) async throws -> Response {
        let session = try await siteSession(request)
        guard let number = Int(program) else { throw ETOError(.badRequest, "The ProgramID must be a number") }
        guard try await programs(ofSite: session.site).contains(where: { $0.number == number }) else {
            throw ETOError(.forbidden, "Program \(number) is not a program of site \(session.site)")
        }
        let text = String(term.prefix(100))
        let enrolled = try await store.list(
            RecordQuery(
                table: "eto_enrollment",
                query: EncodedQuery().and("participant.first_name", .like, text).or("participant.last_name", .like, text)
                    .and("program.number", .equals, String(number)),
                fields: ["participant"], limit: 1000, count: false
            ),
            caller: session.caller
        ).records.map { $0["participant"] }
        guard !enrolled.isEmpty else { return Response.json(.array([])) }
        let found = try await participants(EncodedQuery().and("sys_id", .in, Set(enrolled).joined(separator: ",")), session: session, limit: 200)
        return Response.json(.array(found.map { Self.participantJSON($0, site: session.site) }))
    }

    /// `GET Actor.svc/participant/enrollment/{CLID}`: the participant's enrollments, newest first.
    func enrollments(_ clid: String, request: Request) async throws -> Response {
        let session = try await siteSession(request)
        let participant = try await participant(number: clid, session: session)
        let rows = try await store.list(
            RecordQuery(
                table: "eto_enrollment",
                query: EncodedQuery().and("participant", .equals, participant.sysID).orderBy("start_date", descending: true),
                fields: ["number", "program.number", "program.name", "start_date", "projected_end_date", "end_date"],
                limit: 1000, count: false
            ),
            caller: session.caller
        ).records
        return Response.json(.array(rows.map { row in
            JSONValue(members: [
                ("ID", .integer(Int(row["number"]) ?? 0)), ("ParticipantID", .integer(Int(participant["number"]) ?? 0)),
                ("ProgramID", .integer(Int(row["program.number"]) ?? 0)), ("ProgramName", .string(row["program.name"])),
                ("StartDate", Self.dotNetDate(row["start_date"])), ("ProjectedEndDate", Self.dotNetDate(row["projected_end_date"])),
                ("EndDate", Self.dotNetDate(row["end_date"])),
            ])
        }))
    }

    /// `POST Actor.svc/participant/enrollment/` `{participantID, programID, startDate, projectedEndDate}` →
    /// `{"SaveParticipantEnrollmentResult":{"ID": n}}`. The program must be an enabled one of the token's site.
    func saveEnrollment(_ request: Request, context: Context) async throws -> Response {
        let session = try await siteSession(request)
        let body = try await Self.body(request, context: context)
        func value(_ key: String) -> JSONValue? {
            body.objectValue?.first { $0.key.caseInsensitiveCompare(key) == .orderedSame }?.value
        }
        func number(_ key: String) throws -> Int {
            guard let raw = value(key), let number = raw.intValue ?? raw.stringValue.flatMap({ Int($0) }) else {
                throw ETOError(.badRequest, "\(key) must be a number")
            }
            return number
        }
        let participant = try await participant(number: String(try number("participantID")), session: session)
        let programID = try number("programID")
        guard let program = try await programs(ofSite: session.site).first(where: { $0.number == programID }) else {
            throw ETOError(.forbidden, "Program \(programID) is not a program of site \(session.site)")
        }
        guard !program.disabled else { throw ETOError(.badRequest, "Program \(programID) (\(program.name)) is disabled") }
        func date(_ key: String, required: Bool) throws -> String? {
            guard let raw = value(key), raw != .null else {
                if required { throw ETOError(.badRequest, "\(key) is needed, as /Date(ms)/") }
                return nil
            }
            guard let text = raw.stringValue, let date = Self.date(text) else {
                throw ETOError(.badRequest, "\(key) must be /Date(ms)/, MM/dd/yyyy or yyyy-MM-dd")
            }
            return date
        }
        var values = [
            "participant": participant.sysID, "program": try await programSysID(programID),
            "start_date": try date("startDate", required: true) ?? "",
        ]
        if let end = try date("projectedEndDate", required: false) { values["projected_end_date"] = end }
        let sysID = try await store.insert(into: "eto_enrollment", values: values, caller: session.caller)
        let saved = try await store.get(sysID, in: "eto_enrollment", fields: ["number"], caller: session.caller)
        return Response.json(JSONValue(members: [
            ("SaveParticipantEnrollmentResult", JSONValue(members: [("ID", .integer(Int(saved.record["number"]) ?? 0))])),
        ]))
    }

    /// A participant of the token's site by its number (CLID).
    func participant(number clid: String, session: SiteLogin) async throws -> Record {
        guard let number = Int(clid), number > 0 else { throw ETOError(.badRequest, "The participant id (CLID) must be a number") }
        guard let found = try await participants(EncodedQuery().and("number", .equals, String(number)), session: session, limit: 1).first
        else { throw ETOError(.notFound, "No participant \(number) at site \(session.site)") }
        return found
    }

    func programSysID(_ number: Int) async throws -> String {
        try await store.list(
            RecordQuery(table: "sys_program", query: EncodedQuery().and("number", .equals, String(number)), fields: ["sys_id"], limit: 1, count: false),
            caller: .system
        ).records.first?.sysID ?? ""
    }

    /// `POST Actor.svc/participant/` (or `participant/{useNullValues}`) `{"participant":{…}}`: adds a participant to the
    /// token's site, or with `ID` changes one of its participants. A new participant with the same names and date of
    /// birth as one of the site's is refused (409, naming it), as ETO's duplicate check does. A new participant with a
    /// `ProgramID` (a number or a string) is enrolled in that program from today, so that the program's search finds
    /// them at once.
    func saveParticipant(_ request: Request, context: Context) async throws -> Response {
        let session = try await siteSession(request)
        let body = try await Self.body(request, context: context)
        guard let participant = body["participant"], participant.objectValue != nil else {
            throw ETOError(.badRequest, "Send {\"participant\": {FirstName, LastName, DateOfBirth, …}}")
        }
        func number(_ key: String) throws -> Int? {
            guard let value = participant[key], value != .null else { return nil }
            guard let number = value.intValue ?? value.stringValue.flatMap({ Int($0) }) else {
                throw ETOError(.badRequest, "\(key) must be a number")
            }
            return number
        }
        if let site = try number("SiteID"), site != session.site {
            throw ETOError(.forbidden, "This security token is for site \(session.site), not \(site)")
        }
        var values: [String: String] = [:]
        for (key, field) in [("FirstName", "first_name"), ("LastName", "last_name"), ("Address1", "address1"), ("ZipCode", "zip_code")] {
            guard let value = participant[key], value != .null else { continue }
            guard let text = value.stringValue, text.count <= 200 else { throw ETOError(.badRequest, "\(key) must be text (at most 200 characters)") }
            values[field] = text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if let born = participant["DateOfBirth"], born != .null {
            guard let text = born.stringValue, let date = Self.date(text) else {
                throw ETOError(.badRequest, "DateOfBirth must be /Date(ms)/, MM/dd/yyyy or yyyy-MM-dd")
            }
            values["date_of_birth"] = date
        }
        let caller = session.caller
        let sysID: String
        if let id = try number("ID"), id > 0 {
            guard let existing = try await participants(EncodedQuery().and("number", .equals, String(id)), session: session, limit: 1).first
            else { throw ETOError(.notFound, "No participant \(id) at site \(session.site)") }
            sysID = try await store.update(existing.sysID, in: "eto_participant", values: values, caller: caller)
        } else {
            guard !values["first_name", default: ""].isEmpty, !values["last_name", default: ""].isEmpty else {
                throw ETOError(.badRequest, "A new participant needs FirstName and LastName")
            }
            var same = EncodedQuery().and("first_name", .equals, values["first_name"]!).and("last_name", .equals, values["last_name"]!)
            if let born = values["date_of_birth"] { same = same.and("date_of_birth", .equals, born) }
            if let duplicate = try await participants(same, session: session, limit: 1).first {
                throw ETOError(.conflict, "Participant \(duplicate["number"]) has the same name and date of birth")
            }
            guard let site = try await store.list(
                RecordQuery(table: "sys_site", query: EncodedQuery().and("number", .equals, String(session.site)), fields: ["sys_id"], limit: 1, count: false),
                caller: .system
            ).records.first else { throw ETOError(.forbidden, "Site \(session.site) no longer exists") }
            // The program is checked before anything is written.
            var program: String? = nil
            if let programID = try number("ProgramID"), programID > 0 {
                guard let found = try await programs(ofSite: session.site).first(where: { $0.number == programID }) else {
                    throw ETOError(.forbidden, "Program \(programID) is not a program of site \(session.site)")
                }
                guard !found.disabled else { throw ETOError(.badRequest, "Program \(programID) (\(found.name)) is disabled") }
                program = try await programSysID(programID)
            }
            values["site"] = site.sysID
            // The check above answers the common case with the duplicate's number; this one, in the insert's own
            // transaction (exclusive: no other such write runs meanwhile), makes two adds of one person at once add
            // them once.
            let table = try store.table("eto_participant").physicalTable
            let (first, last, born) = (values["first_name"]!, values["last_name"]!, values["date_of_birth"])
            var options = WriteOptions()
            options.exclusive = true
            sysID = try await store.insert(into: "eto_participant", values: values, caller: caller, options: options) { db, added in
                var twins: SQLFragment = "SELECT number FROM " + .identifier(table) + " WHERE site = " + .bind(site.sysID)
                    + " AND first_name = " + .bind(first) + " AND last_name = " + .bind(last) + " AND sys_id <> " + .bind(added)
                if let born { twins = twins + " AND date_of_birth = " + .bind(born) }
                if let twin = try await db.rows(twins + " LIMIT 1").first {
                    let number = try twin.value(at: "number", kind: .text).text ?? ""
                    throw ETOError(.conflict, "Participant \(number) has the same name and date of birth")
                }
            }
            if let program {
                do {
                    try await store.insert(
                        into: "eto_enrollment",
                        values: ["participant": sysID, "program": program, "start_date": GlideDateTime.formatDate(Date())],
                        caller: caller
                    )
                } catch {
                    let added = try await participants(EncodedQuery().and("sys_id", .equals, sysID), session: session, limit: 1)
                    throw ETOError(
                        .serviceUnavailable,
                        "Participant \(added.first?["number"] ?? sysID) was added, but could not be enrolled in the program: \(error)"
                    )
                }
            }
        }
        let saved = try await participants(EncodedQuery().and("sys_id", .equals, sysID), session: session, limit: 1)
        guard let record = saved.first else { throw ETOError(.notFound, "The participant is not at site \(session.site)") }
        return Response.json(Self.participantJSON(record, site: session.site))
    }

    /// `/Date(ms)/` (with an optional offset), `MM/dd/yyyy` or `yyyy-MM-dd` as `yyyy-MM-dd`; nil for anything else.
    static func date(_ text: String) -> String? {
        let calendar = utcCalendar
        func format(_ year: Int, _ month: Int, _ day: Int) -> String? {
            guard (1800...2200).contains(year), (1...12).contains(month), (1...31).contains(day), let date = calendar.date(from: DateComponents(year: year, month: month, day: day)),
                calendar.component(.day, from: date) == day, calendar.component(.month, from: date) == month
            else { return nil }
            return String(format: "%04d-%02d-%02d", year, month, day)
        }
        if text.hasPrefix("/Date("), text.hasSuffix(")/") {
            let inner = text.dropFirst(6).dropLast(2)
            let digits = inner.prefix { $0.isNumber || $0 == "-" }
            guard let ms = Int(digits), ms.magnitude < 10_000_000_000_000 else { return nil }
            let date = Date(timeIntervalSince1970: Double(ms) / 1000)
            let parts = calendar.dateComponents([.year, .month, .day], from: date)
            return format(parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
        }
        let us = text.split(separator: "/").compactMap { Int($0) }
        if us.count == 3, text.filter({ $0 == "/" }).count == 2 { return format(us[2], us[0], us[1]) }
        let iso = text.split(separator: "-").compactMap { Int($0) }
        if iso.count == 3, text.filter({ $0 == "-" }).count == 2 { return format(iso[0], iso[1], iso[2]) }
        return nil
    }

    private func participants(_ query: EncodedQuery, session: SiteLogin, limit: Int) async throws -> [Record] {
        let caller = session.caller
        let scoped = query.and("site.number", .equals, String(session.site)).orderBy("last_name").orderBy("first_name")
        return try await store.list(
            RecordQuery(
                table: "eto_participant", query: scoped,
                fields: ["number", "first_name", "last_name", "date_of_birth", "address1", "zip_code"],
                limit: limit, count: false
            ),
            caller: caller
        ).records
    }

    /// A participant's SubjectID (what TouchPoint responses point at): its CLID plus 100000.
    static func subjectID(of clid: Int) -> Int {
        let (sum, overflow) = clid.addingReportingOverflow(100_000)
        return overflow ? 0 : sum
    }

    static func participantJSON(_ record: Record, site: Int) -> JSONValue {
        JSONValue(members: [
            ("ID", .integer(Int(record["number"]) ?? 0)), ("FirstName", .string(record["first_name"])),
            ("LastName", .string(record["last_name"])), ("DateOfBirth", dotNetDate(record["date_of_birth"])),
            ("Address1", .string(record["address1"])), ("ZipCode", .string(record["zip_code"])),
            ("SubjectID", .integer(subjectID(of: Int(record["number"]) ?? 0))), ("SiteID", .integer(site)),
            ("CustomDemoData", .array([])),
        ])
    }

    /// `/Date(ms)/` as the UTC date-time it names (to the second); `MM/dd/yyyy` and `yyyy-MM-dd` as midnight UTC of
    /// that day; nil for anything else.
    static func dateTime(_ text: String) -> String? {
        guard let day = date(text) else { return nil }
        guard text.hasPrefix("/Date(") else { return day + " 00:00:00" }
        let digits = text.dropFirst(6).prefix { $0.isNumber || $0 == "-" }
        guard let ms = Int(digits) else { return nil }
        let seconds = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000)
        return GlideDateTime.format(Date(timeIntervalSince1970: Double(seconds)))
    }

    /// A stored date-time (`YYYY-MM-DD HH:MM:SS`, UTC) as .NET's JSON date, `/Date(ms)/`; null when empty or out of
    /// the years 1800 to 2200.
    static func dotNetDateTime(_ text: String) -> JSONValue {
        guard let moment = GlideDateTime.parse(text), date(String(text.prefix(10))) != nil else { return .null }
        return .string("/Date(\(Int(moment.timeIntervalSince1970) * 1000))/")
    }

    /// A `yyyy-MM-dd` date as .NET's JSON date, `/Date(ms)/` (midnight UTC); null when empty or not a date of years
    /// 1800 to 2200 (stored values may be anything an administrator wrote).
    static func dotNetDate(_ text: String) -> JSONValue {
        guard let day = date(text) else { return .null }
        let parts = day.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3, let date = utcCalendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2]))
        else { return .null }
        return .string("/Date(\(Int(date.timeIntervalSince1970 * 1000)))/")
    }

    static var utcCalendar: Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }
}
