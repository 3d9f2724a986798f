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

    static func seed(_ store: RecordStore) async throws {
        for (index, enterprise) in enterprises.enumerated() {
            let enterpriseID = DemoData.id("sys_enterprise", index + 1)
            try await store.insert(
                into: "sys_enterprise", values: ["sys_id": enterpriseID, "name": enterprise.name, "guid": enterprise.guid],
                caller: .system
            )
            for (site, name, programs, staff) in enterprise.sites {
                let siteID = DemoData.id("sys_site", site)
                try await store.insert(
                    into: "sys_site", values: ["sys_id": siteID, "name": name, "enterprise": enterpriseID, "number": String(site)],
                    caller: .system
                )
                for (program, programName, disabled) in programs {
                    try await store.insert(
                        into: "sys_program",
                        values: ["sys_id": DemoData.id("sys_program", program), "name": programName, "site": siteID,
                                 "number": String(program), "disabled": disabled ? "true" : "false"],
                        caller: .system
                    )
                }
                for user in staff {
                    try await store.insert(
                        into: "sys_site_member", values: ["user": DemoData.userID(user), "site": siteID, "roles": "staff"],
                        caller: .system
                    )
                }
            }
        }
    }
}
