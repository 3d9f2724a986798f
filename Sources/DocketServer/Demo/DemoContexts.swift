import DocketModel
import Foundation

/// The demo's case-work contexts (ETO's enterprise → site → program): two enterprises, so that their separation
/// shows. john.doe and beth.anglin are staff of the first, abel.tuter of the second only.
enum DemoContexts {
    struct Enterprise {
        var name: String
        var guid: String
        /// (SiteID, name, programs (ProgramID, name, disabled), staff user names)
        var sites: [(Int, String, [(Int, String, Bool)], [String])]
    }

    static let enterprises: [Enterprise] = [
        Enterprise(
            name: "Docket Outreach", guid: "7c9e6679-7425-40de-944b-e07fc1f90ae7",
            sites: [
                (101, "Downtown Drop-in Center", [(1001, "Street Outreach", false), (1002, "Shelter Check-in", false),
                                                   (1003, "Winter Response 2019", true)], ["john.doe", "beth.anglin"]),
                (102, "Eastside Outreach", [(1004, "Point-in-Time Count", false)], ["john.doe"]),
            ]
        ),
        Enterprise(
            name: "Harbor Shelter Network", guid: "c56a4180-65aa-42ec-a945-5fd21dec0538",
            sites: [(201, "Harbor House", [(2001, "Family Shelter", false)], ["abel.tuter"])]
        ),
    ]

    /// Participants: (site, CLID, first name, last name, date of birth).
    static let participants: [(Int, Int, String, String, String)] = [
        (101, 5001, "Maria", "Lopez", "1984-03-12"), (101, 5002, "James", "Carter", "1979-11-02"),
        (102, 5003, "Aisha", "Rahman", "1991-06-25"), (201, 7001, "Tom", "Becker", "1968-01-30"),
        (201, 7002, "Lena", "Hoffmann", "2001-09-14"),
    ]

    /// Enrollments: (CLID, ProgramID, start date).
    static let enrollments: [(Int, Int, String)] = [
        (5001, 1001, "2026-09-01"), (5002, 1002, "2026-10-15"), (5003, 1004, "2026-01-28"), (7001, 2001, "2026-08-03"),
        (7002, 2001, "2026-11-02"),
    ]

    /// TouchPoints per enterprise: (TouchPointID, name, elements as JSON).
    static let touchpoints: [[(Int, String, String)]] = [
        [(301, "Street Outreach Contact", #"[{"ElementID":1,"ElementType":5,"Stimulus":"Contact notes","IsRequired":true},{"ElementID":2,"ElementType":4,"Stimulus":"Sleeping location","IsRequired":true,"Choices":[{"TouchPointElementChoiceID":11,"ChoiceText":"Street"},{"TouchPointElementChoiceID":12,"ChoiceText":"Vehicle"},{"TouchPointElementChoiceID":13,"ChoiceText":"Shelter"}]},{"ElementID":3,"ElementType":9,"Stimulus":"Date of contact","IsRequired":false}]"#)],
        [(401, "Family Intake", #"[{"ElementID":21,"ElementType":5,"Stimulus":"Household size","IsRequired":true}]"#)],
    ]

    /// Responses: (TouchPointResponseID, TouchPointID, CLID, ProgramID, date, answers as JSON).
    static let responses: [(Int, Int, Int, Int, String, String)] = [
        (5001, 301, 5001, 1001, "2026-11-18 16:40:00", #"[{"ElementID":1,"ElementType":5,"Value":"Met at the library steps; accepted a blanket."},{"ElementID":2,"ElementType":4,"ResponseElementChoices":[{"TouchPointElementChoiceID":11}]},{"ElementID":3,"ElementType":9,"Value":"11/18/2026"}]"#),
        (5002, 401, 7001, 2001, "2026-11-10 09:05:00", #"[{"ElementID":21,"ElementType":5,"Value":"3"}]"#),
    ]

    static func seed(_ store: RecordStore) async throws {
        for (index, enterprise) in enterprises.enumerated() {
            let enterpriseID = DemoData.id("sys_enterprise", index + 1)
            try await store.insert(
                into: "sys_enterprise", values: ["sys_id": enterpriseID, "name": enterprise.name, "guid": enterprise.guid, "sys_domain": enterpriseID],
                caller: .system
            )
            for (site, name, programs, staff) in enterprise.sites {
                let siteID = DemoData.id("sys_site", site)
                try await store.insert(
                    into: "sys_site", values: ["sys_id": siteID, "name": name, "enterprise": enterpriseID, "number": String(site),
                             "sys_domain": enterpriseID],
                    caller: .system
                )
                for (program, programName, disabled) in programs {
                    try await store.insert(
                        into: "sys_program",
                        values: ["sys_id": DemoData.id("sys_program", program), "name": programName, "site": siteID,
                                 "number": String(program), "disabled": disabled ? "true" : "false", "sys_domain": enterpriseID],
                        caller: .system
                    )
                }
                for user in staff {
                    try await store.insert(
                        into: "sys_site_member", values: ["user": DemoData.userID(user), "site": siteID, "roles": "staff"],
                        caller: .system
                    )
                }
                for (at, clid, first, last, born) in participants where at == site {
                    try await store.insert(
                        into: "eto_participant",
                        values: ["sys_id": DemoData.id("eto_participant", clid), "first_name": first, "last_name": last,
                                 "date_of_birth": born, "site": siteID, "number": String(clid),
                                 "sys_domain": enterpriseID],
                        caller: .system
                    )
                }
            }
            for (touchpoint, name, elements) in touchpoints[index] {
                try await store.insert(
                    into: "eto_touchpoint",
                    values: ["sys_id": DemoData.id("eto_touchpoint", touchpoint), "number": String(touchpoint), "name": name,
                             "elements": elements, "sys_domain": enterpriseID],
                    caller: .system
                )
            }
            let programs = Set(enterprise.sites.flatMap { $0.2.map(\.0) })
            for (response, touchpoint, clid, program, date, answers) in responses where programs.contains(program) {
                try await store.insert(
                    into: "eto_response",
                    values: ["number": String(response), "touchpoint": DemoData.id("eto_touchpoint", touchpoint),
                             "participant": DemoData.id("eto_participant", clid), "program": DemoData.id("sys_program", program),
                             "response_date": date, "answers": answers, "sys_domain": enterpriseID],
                    caller: .system
                )
            }
            for (index, (clid, program, start)) in enrollments.enumerated() where programs.contains(program) {
                try await store.insert(
                    into: "eto_enrollment",
                    values: ["number": String(index + 1), "participant": DemoData.id("eto_participant", clid),
                             "program": DemoData.id("sys_program", program), "start_date": start, "sys_domain": enterpriseID],
                    caller: .system
                )
            }
        }
    }
}
