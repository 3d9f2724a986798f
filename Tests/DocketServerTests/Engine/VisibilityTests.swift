import DocketModel
import Foundation
import Testing

@testable import DocketServer

/// One notion of "sees the same" (``RecordStore/visibility(of:reaching:)``, ``RecordStore/judgementKey(for:)``):
/// callers share live work exactly when what decides what they see is alike, and every input that decides it
/// tells two callers apart.
@Suite("Who sees alike")
struct VisibilityTests {
    static func caller(
        _ name: String, roles: Set<String> = ["itil"], timeZone: String = "", domains: Set<String> = [], active: String? = nil
    ) -> Caller {
        var caller = Caller(userID: DemoData.userID(name), userName: name, displayName: name, roles: roles)
        caller.timeZoneName = timeZone
        caller.domains = domains
        caller.activeDomain = active
        return caller
    }

    static func live(_ store: RecordStore, _ table: String, _ query: String = "", _ caller: Caller) throws -> LiveQuery {
        LiveQuery(table: try store.table(table), query: try EncodedQuery(query), caller: caller)
    }

    @Test("two users whose roles grant every task see incidents alike and share judgements; the same query naming 'me' does not")
    func sameAccessShares() async throws {
        try await TestApp.withStore { store in
            let (john, beth) = (Self.caller("john.doe"), Self.caller("beth.anglin"))
            let incident = try store.table("incident")
            #expect(store.visibility(of: john, reaching: incident) == store.visibility(of: beth, reaching: incident))
            #expect(try store.judgementKey(for: Self.live(store, "incident", "active=true", john))
                == store.judgementKey(for: Self.live(store, "incident", "active=true", beth)))
            // The same text, another meaning for each.
            let mine = "assigned_to=javascript:gs.getUserID()"
            #expect(try store.judgementKey(for: Self.live(store, "incident", mine, john))
                != store.judgementKey(for: Self.live(store, "incident", mine, beth)))
            // Another query, another table: not alike.
            #expect(try store.judgementKey(for: Self.live(store, "incident", "active=true", john))
                != store.judgementKey(for: Self.live(store, "incident", "active=false", john)))
            #expect(try store.judgementKey(for: Self.live(store, "incident", "", john)) != store.judgementKey(for: Self.live(store, "problem", "", john)))
        }
    }

    @Test("roles, a rule that names the user (gs.getUserID), the enterprise scope and the time zone each tell callers apart")
    func inputsTellApart() async throws {
        try await TestApp.withStore { store in
            let incident = try store.table("incident")
            let participant = try store.table("eto_participant")
            let john = Self.caller("john.doe")
            // Roles: itil reads every task, a caller without it only the tasks they are involved in.
            #expect(store.visibility(of: john, reaching: incident) != store.visibility(of: Self.caller("john.doe", roles: []), reaching: incident))
            #expect(store.visibility(of: john, reaching: incident) != store.visibility(of: Self.caller("john.doe", roles: ["admin"]), reaching: incident))
            // A rule with javascript:gs.getUserID(): two callers without itil never share.
            let (abel, fred) = (Self.caller("abel.tuter", roles: []), Self.caller("fred.luddy", roles: []))
            #expect(store.visibility(of: abel, reaching: incident) != store.visibility(of: fred, reaching: incident))
            // Enterprises and sites: the scope of a scoped table.
            let first = DemoData.id("sys_enterprise", 1)
            let second = DemoData.id("sys_enterprise", 2)
            let inFirst = Self.caller("john.doe", domains: [first, second], active: first)
            let inSecond = Self.caller("john.doe", domains: [first, second], active: second)
            #expect(store.visibility(of: inFirst, reaching: participant) != store.visibility(of: inSecond, reaching: participant))
            #expect(store.visibility(of: inFirst, reaching: participant)
                != store.visibility(of: Self.caller("john.doe", domains: [first, second]), reaching: participant))
            #expect(store.visibility(of: Self.caller("john.doe", domains: [first]), reaching: participant)
                != store.visibility(of: Self.caller("john.doe", domains: [second]), reaching: participant))
            // The time zone dates are shown in.
            #expect(store.visibility(of: john, reaching: incident)
                != store.visibility(of: Self.caller("john.doe", timeZone: "America/Los_Angeles"), reaching: incident))
            // And each difference reaches the judgement (and so the live group) key.
            #expect(try store.judgementKey(for: Self.live(store, "incident", "", abel)) != store.judgementKey(for: Self.live(store, "incident", "", fred)))
            #expect(try store.judgementKey(for: Self.live(store, "eto_participant", "", inFirst))
                != store.judgementKey(for: Self.live(store, "eto_participant", "", inSecond)))
        }
    }

    /// How each property of ``Caller`` reaches the key: shown by a pair of callers told apart by it, or named as
    /// deciding nothing that is seen. A property added to ``Caller`` fails this test until it is placed here.
    @Test("every property of Caller is accounted for: it tells two callers apart where it decides what they see, or decides nothing shown")
    func everyCallerInputCounts() async throws {
        try await TestApp.withStore { store in
            let incident = try store.table("incident")
            let participant = try store.table("eto_participant")
            let first = DemoData.id("sys_enterprise", 1)
            let base = Self.caller("abel.tuter", roles: [], domains: [first], active: first)
            // Each property: a caller that differs from `base` in it alone, and the table where the difference shows.
            var variants: [String: (Caller, SchemaCatalog.Table)] = [:]
            var other = base
            other.userID = DemoData.userID("fred.luddy")
            variants["userID"] = (other, incident)
            other = base
            // A user name the rules read (`javascript:gs.getUserName()`) — none of the standard rules does, so the
            // key of a query that names it shows it.
            other.userName = "fred.luddy"
            variants["userName"] = (other, incident)
            other = base
            other.roles = ["itil"]
            variants["roles"] = (other, incident)
            other = base
            other.timeZoneName = "Europe/Paris"
            variants["timeZoneName"] = (other, incident)
            other = base
            other.domains = [first, DemoData.id("sys_enterprise", 2)]
            other.activeDomain = nil
            variants["domains"] = (other, participant)
            other = base
            other.activeDomain = DemoData.id("sys_enterprise", 2)
            variants["activeDomain"] = (other, participant)
            // Shown nowhere by the engine's reads (journal authors are stored names, not the reader's).
            let decidesNothingShown: Set<String> = ["displayName"]

            let properties = Set(Mirror(reflecting: base).children.compactMap(\.label))
            #expect(properties == Set(variants.keys).union(decidesNothingShown), "a property of Caller is not accounted for here")
            for (name, (variant, table)) in variants {
                if name == "userName" {
                    let query = "opened_by.user_name=javascript:gs.getUserName()"
                    #expect(try store.judgementKey(for: Self.live(store, "incident", query, base))
                        != store.judgementKey(for: Self.live(store, "incident", query, variant)), "\(name)")
                    continue
                }
                #expect(store.visibility(of: base, reaching: table) != store.visibility(of: variant, reaching: table), "\(name)")
            }
            var renamed = base
            renamed.displayName = "Someone Else"
            #expect(store.visibility(of: base, reaching: incident) == store.visibility(of: renamed, reaching: incident))
        }
    }

    @Test("keys follow the catalog: a table added since is part of a key made after it")
    func followsCatalog() async throws {
        try await TestApp.withStore { store in
            let john = Self.caller("john.doe")
            let before = store.visibility(of: john, reaching: nil)
            _ = try await store.insert(
                into: "sys_db_object", values: ["name": "u_visibility_probe", "label": "Probe"], caller: .system
            )
            #expect(store.visibility(of: john, reaching: nil) != before)
        }
    }
}
