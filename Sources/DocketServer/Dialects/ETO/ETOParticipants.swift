import DocketModel
import Foundation
import Hummingbird

/// ETO's participant reads: `Actor.svc/participant/{CLID}` and `Search.svc/Search/{ProgramID}/{term}`. They run as
/// the site token's user with the token's enterprise active, so the engine's scoping holds; ETO's partition by site
/// is added here (a participant of another site of the same enterprise is not found).
extension ETOAPI {
    /// The caller of a site session: its user, with the session's enterprise as the active domain.
    func caller(of session: ContextSessions.Context) async throws -> Caller {
        guard var caller = try await authenticator.caller(userID: session.userID) else {
            throw ETOError(.unauthorized, "The security token is not valid; sign in to the site again")
        }
        caller.activeDomain = try await enterpriseID(guid: session.enterprise)
        return caller
    }

    /// `GET Actor.svc/participant/{CLID}`.
    func participant(_ clid: String, request: Request) async throws -> Response {
        let (session, _) = try await siteSession(request)
        guard let number = Int(clid), number > 0 else { throw ETOError(.badRequest, "The participant id (CLID) must be a number") }
        let found = try await participants(
            EncodedQuery().and("clid", .equals, String(number)), session: session, limit: 1
        )
        guard let record = found.first else { throw ETOError(.notFound, "No participant \(number) at site \(session.site)") }
        return Response.json(Self.participantJSON(record, site: session.site))
    }

    /// `GET Search.svc/Search/{ProgramID}/{term}`: the site's participants whose first or last name contains `term`.
    func search(program: String, term: String, request: Request) async throws -> Response {
        let (session, _) = try await siteSession(request)
        guard let number = Int(program) else { throw ETOError(.badRequest, "The ProgramID must be a number") }
        guard try await programs(ofSite: session.site).contains(where: { $0.number == number }) else {
            throw ETOError(.forbidden, "Program \(number) is not a program of site \(session.site)")
        }
        let text = String(term.prefix(100))
        let found = try await participants(
            EncodedQuery().and("first_name", .like, text).or("last_name", .like, text), session: session, limit: 200
        )
        return Response.json(.array(found.map { Self.participantJSON($0, site: session.site) }))
    }

    private func participants(_ query: EncodedQuery, session: ContextSessions.Context, limit: Int) async throws -> [Record] {
        let caller = try await caller(of: session)
        let scoped = query.and("site.number", .equals, String(session.site)).orderBy("last_name").orderBy("first_name")
        return try await store.list(
            RecordQuery(
                table: "eto_participant", query: scoped,
                fields: ["clid", "first_name", "last_name", "date_of_birth", "address1", "zip_code", "subject_id"],
                limit: limit, count: false
            ),
            caller: caller
        ).records
    }

    private func enterpriseID(guid: String) async throws -> String? {
        try await store.list(
            RecordQuery(table: "sys_enterprise", query: EncodedQuery().and("guid", .equals, guid), fields: ["sys_id"], limit: 1, count: false),
            caller: .system
        ).records.first?.sysID
    }

    static func participantJSON(_ record: Record, site: Int) -> JSONValue {
        JSONValue(members: [
            ("ID", .integer(Int(record["clid"]) ?? 0)), ("FirstName", .string(record["first_name"])),
            ("LastName", .string(record["last_name"])), ("DateOfBirth", dotNetDate(record["date_of_birth"])),
            ("Address1", .string(record["address1"])), ("ZipCode", .string(record["zip_code"])),
            ("SubjectID", .integer(Int(record["subject_id"]) ?? 0)), ("SiteID", .integer(site)),
            ("CustomDemoData", .array([])),
        ])
    }

    /// A `yyyy-MM-dd` date as .NET's JSON date, `/Date(ms)/` (midnight UTC); null when empty or unreadable.
    static func dotNetDate(_ text: String) -> JSONValue {
        let parts = text.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3 else { return .null }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let date = calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2])) else { return .null }
        return .string("/Date(\(Int(date.timeIntervalSince1970 * 1000)))/")
    }
}
