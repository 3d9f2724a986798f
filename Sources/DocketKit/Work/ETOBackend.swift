import Foundation

/// ``WorkBackend`` over ETO, where it applies: participants of the chosen site are the items (`show`, `create
/// participant`, `edit`). ETO has no list of items assigned to a user, no states or actions, no deletion and no
/// comments in its API; those calls fail with a ``DocketError`` that says so and what to use instead.
public struct ETOBackend: WorkBackend {
    let client: DocketClient

    public init(client: DocketClient) { self.client = client }

    private var eto: ETOService { client.eto }

    static func notApplicable(_ what: String) -> DocketError {
        DocketError(kind: .invalidRequest, message: "ETO has no \(what); use 'docket participants search TERM', 'docket show ID', 'docket create participant', 'docket edit ID' or 'docket touchpoint'")
    }

    public func myItems(type: String?) async throws -> [WorkItem] { throw Self.notApplicable("list of items assigned to you") }

    public func reportedByMe(type: String?) async throws -> [WorkItem] { throw Self.notApplicable("list of items you reported") }

    public func item(_ id: String) async throws -> WorkItem {
        Self.item(try await eto.participant(try Self.number(id)))
    }

    public func comment(on id: String, _ text: String) async throws { throw Self.notApplicable("comments (record a TouchPoint instead)") }

    public func create(type: String, fields: [(String, String)]) async throws -> WorkItem {
        guard type.caseInsensitiveCompare("participant") == .orderedSame else {
            throw DocketError(kind: .invalidRequest, message: "ETO creates participants here ('docket create participant FirstName=… LastName=…'), not \(type)")
        }
        return Self.item(try await eto.saveParticipant(fields: fields))
    }

    public func edit(_ id: String, fields: [(String, String)]) async throws -> WorkItem {
        Self.item(try await eto.saveParticipant(id: try Self.number(id), fields: fields))
    }

    public func actions(for id: String) async throws -> [WorkAction] { [] }

    public func transition(_ id: String, action: String, fields: [(String, String)]) async throws -> WorkItem {
        throw Self.notApplicable("states or actions for participants")
    }

    public func delete(_ id: String) async throws { throw Self.notApplicable("way to delete a participant") }

    public func choices(for id: String, field: String) async throws -> [WorkChoice] {
        throw Self.notApplicable("choice lists for participant fields (a TouchPoint's choices: 'docket touchpoint list')")
    }

    public func watchMine() -> AsyncThrowingStream<WorkNotification, any Error> {
        AsyncThrowingStream { $0.finish(throwing: Self.notApplicable("live notifications")) }
    }

    static func number(_ id: String) throws -> Int {
        guard let number = Int(id), number > 0 else {
            throw DocketError(kind: .invalidRequest, message: "'\(id)' is not a participant id (CLID)")
        }
        return number
    }

    static func item(_ participant: ETOParticipant) -> WorkItem {
        var fields = ["FirstName": participant.firstName, "LastName": participant.lastName,
                      "SubjectID": String(participant.subjectID), "SiteID": String(participant.siteID)]
        if let born = participant.dateOfBirth { fields["DateOfBirth"] = born }
        return WorkItem(
            id: String(participant.id), type: "participant", title: "\(participant.firstName) \(participant.lastName)", state: "",
            fields: fields, legalActions: []
        )
    }
}
