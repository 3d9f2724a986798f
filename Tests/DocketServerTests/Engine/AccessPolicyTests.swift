import Testing

@testable import DocketServer

/// ``AccessPolicy``'s rules for a table: found by table, for the table's whole ancestry, in the order written.
@Suite("Access policy")
struct AccessPolicyTests {
    let catalog = SchemaCatalog(tables: BaseSchema.tables, choices: [:])

    /// Rules told apart by the one field each may write.
    static let policy = AccessPolicy(rules: [
        AccessRule("task", [.read], roles: ["itil"], writableFields: ["r0"]),
        AccessRule("incident", [.read, .write], roles: ["itil"], writableFields: ["r1"]),
        AccessRule("sys_user", [.read], roles: ["itil"], writableFields: ["r2"]),
        AccessRule("task", [.write], roles: ["itil"], writableFields: ["r3"]),
        AccessRule("incident", [.read], roles: ["itil"], writableFields: ["r4"]),
        AccessRule("task", [.read], roles: ["admin_only"], writableFields: ["r5"]),
        AccessRule("problem", [.read], roles: ["itil"], writableFields: ["r6"]),
    ])

    static func names(_ rules: [AccessRule]) -> [String] { rules.map { $0.writableFields?.first ?? "?" } }

    @Test("a table's rules are those of its ancestry that grant the operation to the caller's roles, in the order written")
    func ancestryInOrder() throws {
        let incident = try #require(catalog.table("incident"))
        let task = try #require(catalog.table("task"))
        #expect(incident.ancestry.contains("task"))
        #expect(Self.names(Self.policy.rules(for: .read, on: incident, caller: Callers.john)) == ["r0", "r1", "r4"])
        #expect(Self.names(Self.policy.rules(for: .write, on: incident, caller: Callers.john)) == ["r1", "r3"])
        #expect(Self.names(Self.policy.rules(for: .read, on: task, caller: Callers.john)) == ["r0"])
        #expect(Self.policy.rules(for: .read, on: incident, caller: Callers.abel).isEmpty)
        #expect(Self.policy.rules(for: .delete, on: incident, caller: Callers.john).isEmpty)
        // Rules written on the table itself only.
        #expect(Self.names(Self.policy.ownRules(for: .read, on: incident, caller: Callers.john)) == ["r1", "r4"])
        #expect(Self.policy.ownRules(for: .read, on: task, caller: Callers.abel).isEmpty)
    }

    @Test("the standard policy grants what a scan of every rule grants, in the same order, for every table and operation")
    func sameAsScan() {
        let policy = AccessPolicy.standard
        for table in BaseSchema.tables.compactMap({ catalog.table($0.name) }) {
            for operation in AccessOperation.allCases {
                for caller in [Callers.john, Callers.abel] {
                    let scanned = policy.rules.filter {
                        $0.operations.contains(operation) && table.ancestry.contains($0.table) && caller.hasAnyRole($0.roles)
                    }
                    let found = policy.rules(for: operation, on: table, caller: caller)
                    #expect(found.map(\.table) == scanned.map(\.table), "\(table.name) \(operation)")
                    #expect(found.map(\.operations) == scanned.map(\.operations), "\(table.name) \(operation)")
                    #expect(found.map(\.writableFields) == scanned.map(\.writableFields), "\(table.name) \(operation)")
                }
            }
        }
    }
}
