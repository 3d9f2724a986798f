import DocketKit
import DocketTestSupport
import Foundation
import Testing

// This file imports DocketKit alone, as an app does: the code below is the README's and the DocC Getting
// Started's, as written there, so that they keep compiling and working.

@Suite("Documentation snippets")
struct DocumentationTests {
    @Test("the README's Swift snippet runs against docketd")
    func readme() async throws {
        try await withLiveServer { base throws in
            let client = try DocketClient(instance: base,
                                          credentials: .basic(userName: "john.doe", password: "password"))
            for group in try await client.myWork.myTasks() {          // grouped by type, oldest first
                print(group.label, group.tasks.map(\.number))
            }
            if let task = try await client.myWork.task(number: "INC0010001") {
                try await client.myWork.addCustomerComment("On my way", to: task.sysID)
            }
            let page = try await client.table.records(in: "incident", query: .where("active", .equals, "true"), limit: 20)
            #expect(!page.records.isEmpty)
        }
    }

    @Test("Getting Started's snippets run against docketd")
    func gettingStarted() async throws {
        try await withLiveServer { base throws in
            let client = try DocketClient(
                instance: base,
                credentials: .basic(userName: "john.doe", password: "password")
            )
            let groups = try await client.myWork.myTasks()
            for group in groups {
                print(group.label)                       // "Incident"
                for task in group.tasks { print(task.number, task.shortDescription) }
            }
            if let taskID = groups.first?.tasks.first?.sysID {
                let comments = try await client.myWork.comments(for: taskID)   // newest first
                print(comments.first?.value ?? "no comments yet")
                try await client.myWork.addCustomerComment("On my way", to: taskID)   // seen by the caller
                try await client.myWork.addComment("Checked the logs", to: taskID)    // a work note, as My Work stores it
            }

            let query = EncodedQuery.where("active", .equals, "true").and("priority", .lessOrEqual, "2")
            let page = try await client.table.records(in: "incident", query: query, fields: ["number", "priority"])
            print(page.totalCount ?? 0, page.records.map { $0["number"] ?? "" })

            for try await page in client.table.paginator(in: "incident", pageSize: 500, concurrency: 2) {
                // every matching record, in order, two page requests in flight
                _ = page
            }

            struct Incident: Codable { var number: String; var short_description: String }
            let incidents = try await client.table.records(Incident.self, in: "incident", limit: 10)
            #expect(incidents.count == 10)
            let journal = try await client.myWork.comments(for: groups[0].tasks[0].sysID)
            // Both entries were written in the same second: which comes first is not fixed.
            #expect(Set(journal.prefix(2).map(\.element)) == ["work_notes", "comments"])
        }
    }
}
