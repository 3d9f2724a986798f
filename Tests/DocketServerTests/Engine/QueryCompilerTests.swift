import DocketModel
import Foundation
import Logging
import SQLKit
import SQLiteKit
import Testing

@testable import DocketServer

/// Looks at the SQL the compiler produces, with no data involved.
@Suite("Query compiler SQL")
struct QueryCompilerTests {
    let catalog = SchemaCatalog(tables: BaseSchema.tables, choices: [:])

    /// Compiles a WHERE clause for `query` on `table` and serialises it as SQLite SQL.
    func compile(
        _ query: String, table: String = "incident", caller: Caller = Callers.admin
    ) async throws -> (sql: String, binds: [String]) {
        let connection = try await SQLiteConnection.open(storage: .memory)
        defer { Task { try? await connection.close() } }
        var compiler = QueryCompiler(
            catalog: catalog, policy: .standard, dialect: .sqlite, caller: caller,
            now: GlideDateTime.parse("2024-03-10 15:30:00")!, table: catalog.table(table)!
        )
        var parts: [SQLFragment] = []
        if let filter = try compiler.accessFilter(.read) { parts.append(filter) }
        if let condition = try compiler.condition(for: try EncodedQuery(query)) { parts.append(condition) }
        let statement = "SELECT 1 FROM " + compiler.from + (parts.isEmpty ? "" : " WHERE " + parts.joined(" AND "))
        let (sql, binds) = connection.sql().serialize(statement)
        return (sql, binds.map { "\($0)" })
    }

    @Test("comparison values are bound, never spliced")
    func bindsValues() async throws {
        let (sql, binds) = try await compile("short_description=x' OR 1=1--^priority<=2")
        #expect(sql == #"SELECT 1 FROM "task" AS "t" WHERE (LOWER("t"."short_description") = LOWER(?1) AND "t"."priority" <= ?2)"#)
        #expect(binds == ["x' OR 1=1--", "2"])
    }

    @Test("OR binds tighter than AND, NQ ORs whole groups")
    func precedence() async throws {
        let (sql, _) = try await compile("state=1^ORstate=2^active=true^NQpriority=1")
        #expect(
            sql == #"SELECT 1 FROM "task" AS "t" WHERE ((("t"."state" = ?1 OR "t"."state" = ?2) AND "t"."active" = ?3) OR "t"."priority" = ?4)"#
        )
    }

    @Test("LIKE is case-insensitive with wildcards escaped")
    func like() async throws {
        let (sql, binds) = try await compile("short_descriptionLIKE50%_off")
        #expect(sql.hasSuffix(#"WHERE LOWER("t"."short_description") LIKE ?1 ESCAPE '\'"#))
        #expect(binds == [#"%50\%\_off%"#])
    }

    @Test("IN binds each value; NOT IN keeps empty values")
    func inLists() async throws {
        let (sql, binds) = try await compile("stateIN1,2,3^priorityNOT IN4,5")
        #expect(sql.contains(#""t"."state" IN (?1, ?2, ?3)"#))
        #expect(sql.contains(#"("t"."priority" IS NULL OR NOT "t"."priority" IN (?4, ?5))"#))
        #expect(binds == ["1", "2", "3", "4", "5"])
    }

    @Test("dot-walks join the referenced table")
    func dotWalk() async throws {
        let (sql, binds) = try await compile("assigned_to.user_name=beth.anglin")
        #expect(
            sql == #"SELECT 1 FROM "task" AS "t" LEFT JOIN "sys_user" AS "tj1" ON "tj1"."sys_id" = "t"."assigned_to" WHERE LOWER("tj1"."user_name") = LOWER(?1)"#
        )
        #expect(binds == ["beth.anglin"])
    }

    @Test("unknown fields are dropped; an entirely unknown query filters nothing")
    func unknownFields() async throws {
        #expect(try await compile("nonsense=1^active=true").sql.hasSuffix(#"WHERE "t"."active" = ?1"#))
        #expect(try await compile("nonsense=1").sql == #"SELECT 1 FROM "task" AS "t""#)
    }

    @Test("refusing unusable terms names each, with the field meant; usable queries compile as before")
    func refusedTerms() throws {
        func refusal(_ query: String, table: String = "incident") -> String? {
            var compiler = QueryCompiler(
                catalog: catalog, policy: .standard, dialect: .sqlite, caller: Callers.admin,
                now: GlideDateTime.parse("2024-03-10 15:30:00")!, table: catalog.table(table)!
            )
            compiler.unknownTerms = .refuse
            do {
                let parsed = try EncodedQuery(query)
                _ = try compiler.condition(for: parsed)
                _ = try compiler.orderBy(parsed.orderBy)
                return nil
            } catch let error as EngineError {
                #expect(error.message == "Invalid encoded query")
                return error.detail
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal("staet=2") == "No field 'staet' in incident; did you mean state?")
        #expect(refusal("active=true^ORshort_descriptoinLIKEprinter") == "No field 'short_descriptoin' in incident; did you mean short_description?")
        #expect(refusal("nosuchfield=3") == "No field 'nosuchfield' in incident")
        #expect(refusal("caller_id.nmae=Beth")?.hasPrefix("No field 'nmae' in sys_user; did you mean name") == true)
        #expect(refusal("caller_id.nmae=Beth")?.hasSuffix("(reached through caller_id)") == true)
        #expect(refusal("short_description.name=x") == "'short_description' of incident is not a reference, so 'short_description.name' cannot be followed")
        #expect(refusal("assigned_to=javascript:gs.sleep(1000)")?.contains("not a dynamic value") == true)
        #expect(refusal("active=true^ORDERBYprioirty") == "ORDERBY: No field 'prioirty' in incident; did you mean priority?")
        #expect(refusal("JOINincident.caller_id=sys_usr.sys_id!active=true")?.hasPrefix("No table 'sys_usr'; did you mean sys_user") == true)
        #expect(refusal("active=true^priority<=2^caller_id.name=Beth^ORDERBYDESCnumber") == nil)
        #expect(refusal("assigned_to=javascript:gs.getUserID()") == nil)
    }

    @Test("dynamic values resolve to bound values for the caller")
    func dynamicValues() async throws {
        let (sql, binds) = try await compile("assigned_to=javascript:gs.getUserID()^opened_at>javascript:gs.daysAgoStart(1)", caller: Callers.john)
        #expect(sql.contains(#""t"."assigned_to" = ?"#))
        #expect(binds.contains(Callers.john.userID))
        #expect(binds.contains("2024-03-09 00:00:00"))
    }

    @Test("an unknown script is not executed and its term is dropped")
    func unknownScript() async throws {
        #expect(try await compile("assigned_to=javascript:gs.sleep(1000)").sql == #"SELECT 1 FROM "task" AS "t""#)
    }

    @Test("text in an integer comparison matches nothing instead of failing")
    func wrongType() async throws {
        #expect(try await compile("priority=high").sql.hasSuffix("WHERE 1 = 0"))
    }

    @Test("querying the password field is forbidden")
    func password() async throws {
        await #expect(throws: EngineError.forbiddenQuery) { try await compile("user_password=x", table: "sys_user") }
        await #expect(throws: EngineError.forbiddenQuery) { try await compile("caller_id.user_passwordSTARTSWITH$2") }
    }

    @Test("a user without roles reads only tasks they are involved in, and the defects everyone reads")
    func accessFilter() async throws {
        let (sql, binds) = try await compile("", table: "task", caller: Callers.abel)
        #expect(sql.contains(#""t"."assigned_to" = ?1 OR "t"."opened_by" = ?2 OR "t"."caller_id" = ?3 OR "t"."requested_for" = ?4"#))
        // The rule on defect, a table below task, holds for defects read through task.
        #expect(sql.contains(#" OR "t"."sys_class_name" IN (?5)"#))
        #expect(binds == Array(repeating: Callers.abel.userID, count: 4) + ["defect"])
    }

    @Test("itil reads every task, admin everything, without filters")
    func unrestricted() async throws {
        #expect(try await compile("", table: "task", caller: Callers.john).sql == #"SELECT 1 FROM "task" AS "t""#)
        #expect(try await compile("", table: "sys_journal_field", caller: Callers.admin).sql == #"SELECT 1 FROM "sys_journal_field" AS "t""#)
    }

    @Test("journal entries are readable through their parent record")
    func journalAccess() async throws {
        let (sql, _) = try await compile("", table: "sys_journal_field", caller: Callers.abel)
        #expect(sql.contains(#""t"."element_id" IN (SELECT "tp"#))
        #expect(sql.contains(#""assigned_to" = "#))
    }

    @Test("BETWEEN needs two values")
    func between() async throws {
        #expect(try await compile("priorityBETWEEN1@3").sql.hasSuffix(#"("t"."priority" >= ?1 AND "t"."priority" <= ?2)"#))
        await #expect(throws: EngineError.self) { try await compile("priorityBETWEEN1") }
    }

    @Test("a JOIN is an EXISTS subquery on the other table, linked by the named fields")
    func join() async throws {
        let (sql, binds) = try await compile("JOINsys_user.sys_id=sys_user_group.manager!active=true", table: "sys_user")
        #expect(
            sql == #"SELECT 1 FROM "sys_user" AS "t" WHERE EXISTS (SELECT 1 FROM "sys_user_group" AS "ts1" WHERE "ts1"."manager" = "t"."sys_id" AND "ts1"."active" = ?1)"#
        )
        #expect(binds == ["1"])
    }

    @Test("a related-list query counts the referring records; >0 and =0 are EXISTS and NOT EXISTS")
    func relatedList() async throws {
        let exists = try await compile("RLQUERYincident.problem_id,>=1^ENDRLQUERY", table: "problem")
        #expect(exists.sql.contains(#"EXISTS (SELECT 1 FROM "task" AS "ts1" WHERE "ts1"."problem_id" = "t"."sys_id" AND "ts1"."sys_class_name" IN (?"#))
        let none = try await compile("RLQUERYincident.problem_id,=0^ENDRLQUERY", table: "problem")
        #expect(none.sql.contains("NOT EXISTS (SELECT 1 FROM"))
        let counted = try await compile("RLQUERYincident.problem_id,>2^active=true^ENDRLQUERY", table: "problem")
        #expect(counted.sql.contains(#"(SELECT COUNT(*) FROM "task" AS "ts1" WHERE "ts1"."problem_id" = "t"."sys_id""#))
        #expect(counted.sql.contains(#""ts1"."active" = ?"#))
        #expect(counted.sql.hasSuffix(") > ?\(counted.binds.count)"))
        #expect(counted.binds.last == "2")
        let m2m = try await compile("RLQUERYsys_group_has_role.group,>0,m2m^role.nameLIKEadmin^ENDRLQUERY", table: "sys_user_group")
        #expect(m2m.sql.contains(#"LEFT JOIN "sys_user_role" AS "ts1j1" ON "ts1j1"."sys_id" = "ts1"."role""#))
    }

    @Test("subqueries only see the other table's records the caller may read")
    func subqueryAccess() async throws {
        let (sql, _) = try await compile("RLQUERYincident.problem_id,>=1^ENDRLQUERY", table: "problem", caller: Callers.abel)
        // abel has no role: only incidents he is involved in count.
        #expect(sql.contains(#"EXISTS (SELECT 1 FROM "task" AS "ts1" WHERE "ts1"."problem_id" = "t"."sys_id""#))
        #expect(sql.contains(#""ts1"."caller_id" = ?"#))
    }

    @Test("unknown tables and fields in subqueries drop the term; unknown terms do not count towards the limit")
    func subqueryUnknown() async throws {
        #expect(try await compile("JOINsys_user.sys_id=no_table.manager!active=true", table: "sys_user").sql == #"SELECT 1 FROM "sys_user" AS "t""#)
        #expect(try await compile("JOINincident.sys_id=sys_user_group.manager!", table: "sys_user").sql == #"SELECT 1 FROM "sys_user" AS "t""#)
        #expect(try await compile("RLQUERYincident.nope,>=1^ENDRLQUERY", table: "problem").sql == #"SELECT 1 FROM "task" AS "t""#)
        let many = (0..<2300).map { _ in "AAAA=BBBB" }.joined(separator: "^") + "^sys_id=6816f79cc0a8016401c5a33be04be441"
        let (sql, binds) = try await compile(many, table: "sys_user")
        #expect(sql == #"SELECT 1 FROM "sys_user" AS "t" WHERE "t"."sys_id" = ?1"#)
        #expect(binds == ["6816f79cc0a8016401c5a33be04be441"])
    }
}
