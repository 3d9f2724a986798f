import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import DocketServer

@Suite("Display values in the caller's time zone")
struct DisplayValueTests {
    static let losAngeles = TimeZone(identifier: "America/Los_Angeles")!

    @Test("dates display in the user's time zone in every mode; values stay UTC; journal headers too")
    func output() async throws {
        try await TestApp.withRouter { client throws in
            let uri = "/api/now/table/incident/\(Demo.incident1)?sysparm_display_value=all&sysparm_fields=opened_at,comments"
            let utc = try await client.get(uri, .john).result
            let local = try await client.get(uri, .beth).result
            let value = try #require(utc["opened_at"]?.string("value"))
            #expect(utc["opened_at"]?.string("display_value") == value)
            #expect(local["opened_at"]?.string("value") == value)
            let expected = GlideDateTime.format(try #require(GlideDateTime.parse(value)), in: Self.losAngeles)
            #expect(local["opened_at"]?.string("display_value") == expected)
            #expect(expected != value)
            let stream = local["comments"]?.string("display_value") ?? ""
            let header = try #require(stream.split(separator: "\n").first)
            let utcHeader = try #require(utc["comments"]?.string("display_value").split(separator: "\n").first)
            #expect(header != utcHeader)
            #expect(header.hasSuffix("(Additional comments)"))
            let shown = try await client.get(
                "/api/now/table/incident/\(Demo.incident1)?sysparm_display_value=true&sysparm_fields=opened_at", .beth
            ).result
            #expect(shown.string("opened_at") == expected)
        }
    }

    @Test("one page with dates on both sides of a daylight-saving change: each in its own offset (the renderer's offsets are per quarter hour); choice labels per class; reference links whole")
    func pageAcrossDaylightSaving() async throws {
        try await TestApp.withRouter { client throws in
            // Los Angeles left PDT (UTC-7) for PST (UTC-8) at 2026-11-01 09:00 UTC.
            let moments = ["2026-11-01 08:59:59", "2026-11-01 09:00:00", "2026-11-01 09:14:59", "2026-03-08 10:00:00", "2026-03-08 09:59:59"]
            for (index, moment) in moments.enumerated() {
                let created = try await client.send(
                    .post, "/api/now/table/incident",
                    json: #"{"short_description":"dst \#(index)","due_date":"\#(moment)","state":"2"}"#, headers: .beth
                )
                #expect(created.status == .created)
            }
            let page = try await client.get(
                "/api/now/table/incident?sysparm_query=short_descriptionSTARTSWITHdst&sysparm_display_value=all&sysparm_fields=short_description,due_date,state,caller_id,sys_class_name&ORDERBYshort_description",
                .beth
            )
            let rows = try page.results
            #expect(rows.count == moments.count)
            for row in rows {
                let value = try #require(row["due_date"]?.string("value"))
                let expected = GlideDateTime.format(try #require(GlideDateTime.parse(value)), in: Self.losAngeles)
                #expect(row["due_date"]?.string("display_value") == expected, "\(value)")
                #expect(row["state"]?.string("display_value") == "In Progress")
                if let link = row["caller_id"]?.string("link"), let id = row["caller_id"]?.string("value"), !id.isEmpty {
                    #expect(link.hasSuffix("/api/now/table/sys_user/\(id)"))
                }
            }
            let shown = Set(rows.compactMap { $0["due_date"]?.string("display_value") })
            #expect(shown.contains("2026-11-01 01:59:59") && shown.contains("2026-11-01 01:00:00") && shown.contains("2026-03-08 03:00:00"))
            #expect(shown.contains("2026-03-08 01:59:59"))
        }
    }

    @Test("sysparm_input_display_value: choice labels, reference names and local dates are accepted on write")
    func input() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.send(
                .post, "/api/now/table/incident?sysparm_input_display_value=true&sysparm_fields=urgency,caller_id,due_date,state",
                json: #"{"short_description":"x","urgency":"1 - High","caller_id":"Abel Tuter","due_date":"2026-07-01 09:00:00","state":"In Progress"}"#,
                headers: .beth
            )
            #expect(response.status == .created)
            let record = try response.result
            #expect(record.string("urgency") == "1")
            #expect(record.string("state") == "2")
            #expect(record["caller_id"]?.string("value") == DemoData.userID("abel.tuter"))
            // 09:00 in Los Angeles in July (PDT, UTC-7) is 16:00 UTC.
            #expect(record.string("due_date") == "2026-07-01 16:00:00")
        }
    }
}

@Suite("Journal streams")
struct JournalStreamTests {
    @Test("comments_and_work_notes interleaves both journals, newest first, each with its own label; writes are ignored")
    func combined() async throws {
        try await TestApp.withRouter { client throws in
            let uri = "/api/now/table/incident/\(Demo.incident1)?sysparm_display_value=true&sysparm_fields=comments,work_notes,comments_and_work_notes"
            let record = try await client.get(uri).result
            let combined = record.string("comments_and_work_notes")
            #expect(combined.contains("(Additional comments)\n"))
            #expect(combined.contains("(Work notes)\n"))
            #expect(combined.count == record.string("comments").count + record.string("work_notes").count)
            // Newest first: the work note (day 2) comes before the comment (day 1).
            let workNote = try #require(combined.range(of: "(Work notes)"))
            let comment = try #require(combined.range(of: "(Additional comments)"))
            #expect(workNote.lowerBound < comment.lowerBound)
            let write = try await client.send(
                .patch, "/api/now/table/incident/\(Demo.incident1)", json: #"{"comments_and_work_notes":"ignored"}"#
            )
            #expect(write.status == .ok)
            #expect(try await client.get(uri).result.string("comments_and_work_notes") == combined)
            let raw = try await client.get("/api/now/table/incident/\(Demo.incident1)?sysparm_fields=comments_and_work_notes").result
            #expect(raw.string("comments_and_work_notes") == "")
        }
    }
}
