import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import DocketServer

/// The stock app's lists and notification poll (§A.9 steps 4 and 11) with its bundled query definitions, verbatim:
/// folders, saved queries, result sets with a page size given as a string, pages, CSV, and queries over history.
@Suite("Compass queries")
struct CompassQueryTests {
    // The Compass iOS sample app's bundled query definitions (hcl-compass/ios-defect-tracking-app, MIT licence).
    static let assignedToMe = """
{
    "name": "Assigned To Me",
    "dbId": "",
    "dbIdParent": "",
    "primaryEntityDefName": "Defect",
    "queryFieldDefs": [
        {
            "fieldPathName": "id",
            "isShown": true,
            "sortType": "NO_SORT"
        },
        {
            "fieldPathName": "Headline",
            "isShown": true,
            "sortType": "NO_SORT"
        },
        {
            "fieldPathName": "Severity",
            "isShown": true,
            "sortType": "NO_SORT"
        },
        {
            "fieldPathName": "dbid",
            "isShown": true,
            "sortType": "NO_SORT"
        },
        {
            "fieldPathName": "Submit_Date",
            "isShown": true,
            "sortType": "SORT_DESC"
        },
        {
            "fieldPathName": "State",
            "isShown": true,
            "sortType": "NO_SORT"
        },
        {
            "fieldPathName": "Submitter",
            "isShown": true,
            "sortType": "NO_SORT"
        }
    ],
    "filterNode": {
        "boolOp": "BOOL_OP_AND",
        "fieldFilters": [
            {
                "fieldPath": "Owner",
                "compOp": "COMP_OP_EQ",
                "values": [
                    "[CURRENT_USER]"
                ]
            }
        ]
    }
}
"""

    static let reportedByMe = """
{
    "name": "Reported By Me",
    "dbId": "",
    "dbIdParent": "",
    "primaryEntityDefName": "Defect",
    "queryFieldDefs": [
        {
            "fieldPathName": "id",
            "isShown": true,
            "sortType": "NO_SORT"
        },
        {
            "fieldPathName": "Headline",
            "isShown": true,
            "sortType": "NO_SORT"
        },
        {
            "fieldPathName": "Severity",
            "isShown": true,
            "sortType": "NO_SORT"
        },
        {
            "fieldPathName": "dbid",
            "isShown": true,
            "sortType": "NO_SORT"
        },
        {
            "fieldPathName": "Submit_Date",
            "isShown": true,
            "sortType": "SORT_DESC"
        },
        {
            "fieldPathName": "State",
            "isShown": true,
            "sortType": "NO_SORT"
        }
    ],
    "filterNode": {
        "boolOp": "BOOL_OP_AND",
        "fieldFilters": [
            {
                "fieldPath": "Submitter",
                "compOp": "COMP_OP_EQ",
                "values": [
                    "[CURRENT_USER]"
                ]
            }
        ]
    }
}
"""

    static let modifiedDefect = """
{
    "name": "Modified Defect",
    "dbId": "",
    "dbIdParent": "",
    "primaryEntityDefName": "Defect",
    "queryFieldDefs": [
        {
            "fieldPathName": "id",
            "isShown": true,
            "sortType": "NO_SORT"
        },
        {
            "fieldPathName": "Headline",
            "isShown": true,
            "sortType": "NO_SORT"
        },
        {
            "fieldPathName": "dbid",
            "isShown": true,
            "sortType": "NO_SORT"
        },
        {
            "fieldPathName": "history.action_name",
            "isShown": true,
            "sortType": "NO_SORT"
        }
    ],
    "filterNode": {
        "boolOp": "BOOL_OP_AND",
        "fieldFilters": [
            {
                "fieldPath": "Owner",
                "compOp": "COMP_OP_EQ",
                "values": [
                    "[CURRENT_USER]"
                ]
            },
            {
                "fieldPath": "history.action_name",
                "compOp": "COMP_OP_IN",
                "values": [
                    "Submit",
                    "Modify",
                    "Assign"
                ]
            },
            {
                "fieldPath": "history.action_timestamp",
                "compOp": "COMP_OP_GT",
                "values": [
                    ""
                ]
            },
            {
                "fieldPath": "history.user_name",
                "compOp": "COMP_OP_NEQ",
                "values": [
                    "[CURRENT_USER]"
                ]
            }
        ]
    }
}
"""

    static let base = CompassAPITests.base

    /// The notification query with the time of the last poll filled in, as the app does.
    static func modifiedDefect(since: String) throws -> String {
        var body = try JSONValue.parse(Array(modifiedDefect.utf8)).objectValue ?? [:]
        var node = body["filterNode"]?.objectValue ?? [:]
        node["fieldFilters"] = .array((node["fieldFilters"]?.arrayValue ?? []).map { filter in
            guard filter["fieldPath"]?.stringValue == "history.action_timestamp", var object = filter.objectValue else { return filter }
            object["values"] = .array([.string(since)])
            return .object(object)
        })
        body["filterNode"] = .object(node)
        return String(decoding: JSONValue.object(body).serialized(), as: UTF8.self)
    }

    /// The app's list flow: the personal folder, the query created when missing, a result set, its first page.
    static func list(_ client: any TestClientProtocol, _ headers: HTTPFields, _ definition: String, name: String) async throws -> [[String]] {
        let folders = try await client.get(base + "/workspace/folders", headers).json.arrayValue ?? []
        let personal = try #require(folders.first { $0["name"]?.stringValue == "Personal Queries" })
        let folderID = try #require(personal["dbId"]?.stringValue)
        var queryID = personal["children"]?.arrayValue?.first { $0["name"]?.stringValue == name }?["dbId"]?.stringValue
        if queryID == nil {
            var body = try JSONValue.parse(Array(definition.utf8)).objectValue ?? [:]
            body["dbIdParent"] = .string(folderID)
            let created = try await client.execute(uri: base + "/workspace/queryDefs", method: .post, headers: headers, body: ByteBuffer(bytes: JSONValue.object(body).serialized()))
            #expect(created.status == .created)
            let echo = try created.json
            #expect(echo["queryFieldDefs"]?.arrayValue?.allSatisfy { $0["sortType"]?.stringValue != nil } == true)
            #expect(echo["dbIdParent"]?.stringValue == folderID)
            queryID = echo["dbId"]?.stringValue
        }
        let id = try #require(queryID)
        let set = try await client.execute(uri: base + "/workspace/queryDefs/\(id)/resultsets", method: .post, headers: headers, body: ByteBuffer(string: #"{"pageSize":"999"}"#))
        #expect(set.status == .created)
        let handle = try #require(try set.json["result_set_id"]?.stringValue)
        let page = try await client.get(base + "/workspace/queryDefs/\(id)/resultsets/\(handle)", headers).json
        return (page["rows"]?.arrayValue ?? []).map { ($0["values"]?.arrayValue ?? []).compactMap(\.stringValue) }
    }

    @Test("Assigned To Me and Reported By Me, as the app builds them, newest first; the query is made once")
    func lists() async throws {
        try await TestApp.withRouter { client in
            let john = try await CompassAPITests.login(client)
            let assigned = try await Self.list(client, john, Self.assignedToMe, name: "Assigned To Me")
            #expect(Set(assigned.map { $0[0] }) == ["SAMPL00000001", "SAMPL00000002", "SAMPL00000004", "SAMPL00000011"])
            #expect(assigned.allSatisfy { $0.count == 7 })
            let dates = assigned.map { $0[4] }
            #expect(dates == dates.sorted(by: >))
            let first = try #require(assigned.first { $0[0] == "SAMPL00000001" })
            #expect(first[1] == "Login fails after changing the password" && first[5] == "Opened" && first[6] == "beth.anglin")
            #expect(first[3] == "33554433" && first[2] == "2-Major")
            // Again: the query exists now and is reused.
            #expect(try await Self.list(client, john, Self.assignedToMe, name: "Assigned To Me").count == 4)
            let folders = try await client.get(Self.base + "/workspace/folders", john).json.arrayValue ?? []
            #expect(folders.first?["children"]?.arrayValue?.count == 1)
            let reported = try await Self.list(client, john, Self.reportedByMe, name: "Reported By Me")
            #expect(Set(reported.map { $0[0] }) == ["SAMPL00000003", "SAMPL00000005", "SAMPL00000007", "SAMPL00000008"])
            // Another user's personal folder does not show john's queries.
            let beth = try await CompassAPITests.login(client, "beth.anglin")
            let bethFolders = try await client.get(Self.base + "/workspace/folders", beth).json.arrayValue ?? []
            #expect(bethFolders.first?["children"]?.arrayValue?.isEmpty == true)
        }
    }

    @Test("the notification poll: changes by others to my defects since a time, one row per history entry; then deleted")
    func notifications() async throws {
        try await TestApp.withRouter { client in
            let john = try await CompassAPITests.login(client)
            let since = GlideDateTime.format(Date().addingTimeInterval(-60 * 86_400))
            let definition = try Self.modifiedDefect(since: since)
            #expect(definition.contains(since))
            let rows = try await Self.list(client, john, definition, name: "Modified Defect")
            let byDefect = Dictionary(grouping: rows, by: { $0[0] }).mapValues { $0.map { $0[3] } }
            #expect(byDefect["SAMPL00000001"] == ["Submit", "Assign"])
            #expect(byDefect["SAMPL00000011"] == ["Submit", "Assign", "Modify"])
            #expect(byDefect["SAMPL00000003"] == nil)  // submitted by john himself, and not his to own
            // Newer than now: nothing.
            let future = try Self.modifiedDefect(since: "2999-01-01 00:00:00")
            let folders = try await client.get(Self.base + "/workspace/folders", john).json.arrayValue ?? []
            let query = try #require(folders.first?["children"]?.arrayValue?.first?["dbId"]?.stringValue)
            let deleted = try await client.execute(uri: Self.base + "/workspace/queryDefs/\(query)", method: .delete, headers: john, body: nil)
            #expect(deleted.status == .ok)
            #expect(try await Self.list(client, john, future, name: "Modified Defect").isEmpty)
        }
    }

    @Test("pages, record counts, CSV; bad definitions and foreign or forged result sets are refused")
    func pagesAndRefusals() async throws {
        try await TestApp.withRouter { client in
            let john = try await CompassAPITests.login(client)
            var body = try JSONValue.parse(Array(Self.reportedByMe.utf8)).objectValue ?? [:]
            body["dbIdParent"] = .string(CompassQueries.personalFolder)
            let created = try await client.execute(uri: Self.base + "/workspace/queryDefs", method: .post, headers: john, body: ByteBuffer(bytes: JSONValue.object(body).serialized()))
            let id = try #require(try created.json["dbId"]?.stringValue)
            #expect(try await client.get(Self.base + "/workspace/queryDefs/\(id)", john).json["name"]?.stringValue == "Reported By Me")
            let set = try await client.execute(
                uri: Self.base + "/workspace/queryDefs/\(id)/resultsets", method: .post, headers: john,
                body: ByteBuffer(string: #"{"resultSetOptions":{"pageSize":3,"enableRecordCount":true}}"#)
            )
            let handle = try #require(try set.json["result_set_id"]?.stringValue)
            let second = try await client.get(Self.base + "/workspace/queryDefs/\(id)/resultsets/\(handle)?pageNumber=2", john).json
            #expect(second["rows"]?.arrayValue?.count == 1 && second["totalNumberOfRows"]?.intValue == 4)
            let csv = try await client.get(Self.base + "/workspace/queryDefs/\(id)/resultsets/\(handle)/file?fileType=csv", john)
            #expect(csv.headers[.contentType]?.hasPrefix("text/csv") == true)
            #expect(csv.text.split(separator: "\r\n").count == 5)
            #expect(csv.text.hasPrefix(#""id","Headline","Severity","dbid","Submit_Date","State""#))
            // Another session cannot read john's result set, and a forged one is nobody's.
            let beth = try await CompassAPITests.login(client, "beth.anglin")
            try CompassAPITests.expectError(try await client.get(Self.base + "/workspace/queryDefs/\(id)/resultsets/\(handle)", beth), .notFound)
            try CompassAPITests.expectError(try await client.get(Self.base + "/workspace/queryDefs/\(id)/resultsets/abc.def", john), .notFound)
            try CompassAPITests.expectError(try await client.get(Self.base + "/workspace/queryDefs/\(id)/resultsets/\(handle)?pageNumber=0", john), .badRequest)
            for bad in [#"{"name":"x","primaryEntityDefName":"Nope","queryFieldDefs":[{"fieldPathName":"id"}]}"#,
                        #"{"name":"x","primaryEntityDefName":"Defect","queryFieldDefs":[{"fieldPathName":"Nope"}]}"#,
                        #"{"name":"x","primaryEntityDefName":"Defect","queryFieldDefs":[{"fieldPathName":"id"}],"filterNode":{"boolOp":"BOOL_OP_AND","fieldFilters":[{"fieldPath":"id","compOp":"COMP_OP_WHAT","values":[]}]}}"#,
                        #"{"name":"x","primaryEntityDefName":"Defect","queryFieldDefs":[]}"#] {
                try CompassAPITests.expectError(
                    try await client.execute(uri: Self.base + "/workspace/queryDefs", method: .post, headers: john, body: ByteBuffer(string: bad)), .badRequest
                )
            }
            // beth cannot read or delete john's personal query.
            try CompassAPITests.expectError(try await client.get(Self.base + "/workspace/queryDefs/\(id)", beth), .notFound)
            // An ad-hoc query: OR of two owners, sorted by id.
            let adHoc = #"{"queryDef":{"name":"adhoc","primaryEntityDefName":"Defect","queryFieldDefs":[{"fieldPathName":"id","isShown":true,"sortType":"SORT_ASC"},{"fieldPathName":"Owner.fullname","isShown":true,"sortType":"NO_SORT"}],"filterNode":{"boolOp":"BOOL_OP_OR","fieldFilters":[{"fieldPath":"Owner","compOp":"COMP_OP_EQ","values":["beth.anglin"]},{"fieldPath":"State","compOp":"COMP_OP_EQ","values":["Closed"]}]}},"resultSetOptions":{"pageSize":50}}"#
            let adHocSet = try await client.execute(uri: Self.base + "/query", method: .post, headers: john, body: ByteBuffer(string: adHoc))
            let adHocHandle = try #require(try adHocSet.json["result_set_id"]?.stringValue)
            let rows = (try await client.get(Self.base + "/query/\(adHocHandle)", john).json["rows"]?.arrayValue ?? []).map { ($0["values"]?.arrayValue ?? []).compactMap(\.stringValue) }
            #expect(rows.map { $0[0] } == ["SAMPL00000005", "SAMPL00000007", "SAMPL00000008", "SAMPL00000009"])
            #expect(rows.first?[1] == "Beth Anglin")
            // Filters on dbid compare dbids (33554432 + the display id's number), not display ids.
            let byDbid = #"{"queryDef":{"name":"bydbid","primaryEntityDefName":"Defect","queryFieldDefs":[{"fieldPathName":"id","isShown":true,"sortType":"SORT_ASC"},{"fieldPathName":"dbid","isShown":true,"sortType":"NO_SORT"}],"filterNode":{"boolOp":"BOOL_OP_OR","fieldFilters":[{"fieldPath":"dbid","compOp":"COMP_OP_EQ","values":["33554434"]},{"fieldPath":"dbid","compOp":"COMP_OP_GT","values":["33554441"]}]}},"resultSetOptions":{"pageSize":50}}"#
            let dbidSet = try await client.execute(uri: Self.base + "/query", method: .post, headers: john, body: ByteBuffer(string: byDbid))
            let dbidHandle = try #require(try dbidSet.json["result_set_id"]?.stringValue)
            let dbidRows = (try await client.get(Self.base + "/query/\(dbidHandle)", john).json["rows"]?.arrayValue ?? []).map { ($0["values"]?.arrayValue ?? []).compactMap(\.stringValue) }
            #expect(dbidRows.map { $0[0] } == ["SAMPL00000002", "SAMPL00000010", "SAMPL00000011"])
            #expect(dbidRows.first?[1] == "33554434")
        }
    }
}
