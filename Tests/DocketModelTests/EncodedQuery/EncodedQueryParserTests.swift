import DocketModel
import Foundation
import Testing

@Suite("Encoded query parser and printer")
struct EncodedQueryParserTests {
    @Test("AND, OR and NQ build groups with the documented precedence")
    func precedence() throws {
        let query = try EncodedQuery("a=1^ORb=2^c=3^NQd=4")
        #expect(query.groups.count == 2)
        #expect(query.groups[0].clauses.count == 2)
        #expect(query.groups[0].clauses[0].alternatives == [QueryCondition("a", .equals, "1"), QueryCondition("b", .equals, "2")])
        #expect(query.groups[0].clauses[1].alternatives == [QueryCondition("c", .equals, "3")])
        #expect(query.groups[1].clauses[0].alternatives == [QueryCondition("d", .equals, "4")])
    }

    @Test(
        "every operator parses and prints back to the same text",
        arguments: [
            "state=1", "state!=7", "priority<2", "priority<=2", "priority>2", "priority>=2",
            "short_descriptionLIKEemail", "short_descriptionNOT LIKEtest", "numberSTARTSWITHINC",
            "short_descriptionENDSWITHoutage", "stateIN1,2,3", "stateNOT IN6,7,8", "assigned_toISEMPTY",
            "assigned_toISNOTEMPTY", "descriptionEMPTYSTRING", "priorityANYTHING", "priorityBETWEEN1@3",
            "caller_idSAMEASassigned_to", "caller_idNSAMEASopened_by", "sys_class_nameINSTANCEOFtask",
            "assigned_to.user_name=beth.anglin", "caller_id=javascript:gs.getUserID()",
            "active=true^priority<=2^ORpriority=5^NQstate=1^ORDERBYDESCsys_updated_on^ORDERBYnumber",
            "JOINsys_user.sys_id=sys_user_group.manager!active=true",
            "active=true^JOINsys_user.sys_id=sys_user_has_role.user!role=2831a114c611228501d4ea6c309d626d^ORrole=x^inherited=false",
            "RLQUERYsys_group_has_role.group,>0,m2m^role.nameLIKEadmin^ENDRLQUERY", "RLQUERYincident.problem_id,>=1^ENDRLQUERY",
            "active=true^RLQUERYincident.problem_id,=0^ENDRLQUERY^NQJOINproblem.sys_id=incident.problem_id!",
            "AAAA=BBBB^sys_id=6816f79cc0a8016401c5a33be04be441",
        ]
    )
    func roundTrip(text: String) throws {
        let query = try EncodedQuery(text)
        #expect(query.description == text)
        #expect(try EncodedQuery(query.description) == query)
    }

    @Test("aliases normalise to the canonical operator")
    func aliases() throws {
        #expect(try EncodedQuery("short_descriptionNOTLIKEx").conditions == [QueryCondition("short_description", .notLike, "x")])
        #expect(try EncodedQuery("short_description*x").conditions == [QueryCondition("short_description", .like, "x")])
        #expect(try EncodedQuery("short_description!*x").conditions == [QueryCondition("short_description", .notLike, "x")])
        #expect(try EncodedQuery("short_description%x").conditions == [QueryCondition("short_description", .endsWith, "x")])
    }

    @Test("a doubled caret is a literal caret inside a value")
    func escapedCaret() throws {
        let query = try EncodedQuery("short_description=a^^b^state=1")
        #expect(query.conditions == [QueryCondition("short_description", .equals, "a^b"), QueryCondition("state", .equals, "1")])
        #expect(query.description == "short_description=a^^b^state=1")
    }

    @Test("ORDERBY terms may lead, EQ and empty terms are ignored")
    func ordering() throws {
        let query = try EncodedQuery("ORDERBYnumber^active=true^EQ^")
        #expect(query.orderBy == [OrderTerm("number")])
        #expect(query.conditions == [QueryCondition("active", .equals, "true")])
    }

    @Test("an empty query is unfiltered")
    func empty() throws {
        #expect(try EncodedQuery("").isUnfiltered)
        #expect(try EncodedQuery("ORDERBYnumber").isUnfiltered)
    }

    @Test(
        "malformed terms are errors that name the term",
        arguments: [
            "=1", "state", "stateFOO1", "1state=2", "assigned_toISEMPTYx", "a..b=1", "ORDERBY", "Sta te=1",
            "RLQUERYincident.problem_id,>=1", "ENDRLQUERY", "RLQUERYincident,>=1^ENDRLQUERY", "RLQUERYincident.problem_id,~1^ENDRLQUERY",
            "RLQUERYincident.problem_id,>=-1^ENDRLQUERY", "RLQUERYincident.problem_id,>=1,x^ENDRLQUERY",
            "RLQUERYa.b,>0^RLQUERYc.d,>0^ENDRLQUERY^ENDRLQUERY", "JOINsys_user.sys_id!active=true", "JOINa=b.c!x=1",
        ]
    )
    func malformed(text: String) {
        #expect(throws: EncodedQueryError.self) { try EncodedQuery(text) }
    }

    @Test("injection-looking values are plain values")
    func injection() throws {
        let query = try EncodedQuery("short_description=x' OR 1=1--")
        #expect(query.conditions == [QueryCondition("short_description", .equals, "x' OR 1=1--")])
    }

    @Test("and() combines every group of both sides")
    func combine() throws {
        let combined = try EncodedQuery("a=1^NQb=2").and(EncodedQuery("c=3"))
        #expect(combined.description == "a=1^c=3^NQb=2^c=3")
    }
}

@Suite("Dynamic values")
struct DynamicValueTests {
    @Test("the whitelist is recognised and anything else is not")
    func whitelist() {
        #expect(DynamicValue("javascript:gs.getUserID()") == .userID)
        #expect(DynamicValue("javascript:gs.getUserName()") == .userName)
        #expect(DynamicValue("javascript:gs.beginningOfToday()") == .beginningOfToday)
        #expect(DynamicValue("javascript:gs.daysAgoStart(3)") == .daysAgoStart(3))
        #expect(DynamicValue("javascript:gs.dateGenerate('2024-01-02','03:04:05')") == .dateGenerate("2024-01-02 03:04:05"))
        #expect(DynamicValue("javascript:gs.deleteAllRecords()") == nil)
        #expect(DynamicValue("javascript:new GlideRecord('sys_user').query()") == nil)
        #expect(DynamicValue("gs.getUserID()") == nil)
    }

    @Test("date values resolve relative to now, in UTC")
    func resolveDates() {
        let now = GlideDateTime.parse("2024-03-10 15:30:00")!
        func resolve(_ value: DynamicValue) -> String { value.resolve(userID: "u1", userName: "john", now: now) }
        #expect(resolve(.userID) == "u1")
        #expect(resolve(.userName) == "john")
        #expect(resolve(.beginningOfToday) == "2024-03-10 00:00:00")
        #expect(resolve(.endOfToday) == "2024-03-10 23:59:59")
        #expect(resolve(.daysAgoStart(2)) == "2024-03-08 00:00:00")
        #expect(resolve(.daysAgoEnd(2)) == "2024-03-08 23:59:59")
        #expect(resolve(.beginningOfLast7Days) == "2024-03-04 00:00:00")
        #expect(resolve(.hoursAgo(1)) == "2024-03-10 14:30:00")
    }

    @Test("field names with capitals are names, ended by an operator in capitals")
    func capitals() throws {
        #expect(try EncodedQuery("AAAA=BBBB").conditions == [QueryCondition("AAAA", .equals, "BBBB")])
        #expect(try EncodedQuery("u_FooIN1,2").conditions == [QueryCondition("u_Foo", .in, "1,2")])
        #expect(try EncodedQuery("INCIDENT_STATE=1").conditions == [QueryCondition("INCIDENT_STATE", .equals, "1")])
        #expect(try EncodedQuery("stateISEMPTY").conditions == [QueryCondition("state", .isEmpty)])
    }

    @Test("a JOIN takes the conditions after it up to the next group; an RLQUERY those up to ENDRLQUERY")
    func subqueries() throws {
        let join = try EncodedQuery("active=true^JOINsys_user.sys_id=sys_user_group.manager!active=true^name=x^NQstate=1")
        #expect(join.groups.count == 2)
        #expect(join.groups[0].clauses == [QueryClause([QueryCondition("active", .equals, "true")])])
        #expect(
            join.groups[0].subqueries == [
                Subquery(
                    .join(table: "sys_user", field: "sys_id", otherField: "manager"), table: "sys_user_group",
                    query: EncodedQuery(all: [QueryCondition("active", .equals, "true"), QueryCondition("name", .equals, "x")])
                )
            ]
        )
        let related = try EncodedQuery("RLQUERYsys_group_has_role.group,>0,m2m^role.nameLIKEadmin^ENDRLQUERY^active=true")
        #expect(related.groups[0].clauses == [QueryClause([QueryCondition("active", .equals, "true")])])
        #expect(
            related.groups[0].subqueries == [
                Subquery(
                    .relatedList(field: "group", comparison: .greaterThan, count: 0, manyToMany: true), table: "sys_group_has_role",
                    query: EncodedQuery(all: [QueryCondition("role.name", .like, "admin")])
                )
            ]
        )
        #expect(!related.isUnfiltered)
    }
}
