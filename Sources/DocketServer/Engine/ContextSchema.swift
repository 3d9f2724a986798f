import DocketModel

/// The context hierarchy of the base schema: enterprises (tenants), their sites, the programs of each site, and the
/// users who are staff of a site. ETO's enterprise → site → program is this hierarchy as it is; a Compass
/// repository and database, or a ServiceNow domain, are the same idea. Like the rest of ``BaseSchema`` these tables
/// are catalog data; only administrators change them through the generic APIs.
enum ContextSchema {
    typealias S = BaseSchema

    static let tables: [TableDefinition] = [
        // A tenant; `guid` is how ETO clients name it (its `enterpriseGuid`).
        S.table("sys_enterprise", "Enterprise", display: "name", [
            S.string("name", "Name", 100), S.string("guid", "GUID", 36), S.bool("active", "Active", "true"),
        ], indexes: [["guid"]]),
        // An office or service location of an enterprise; `number` is ETO's SiteID.
        S.table("sys_site", "Site", display: "name", [
            S.string("name", "Name", 100), S.ref("enterprise", "Enterprise", "sys_enterprise"), S.int("number", "Site ID"),
            S.bool("active", "Active", "true"),
        ], indexes: [["enterprise"], ["number"]]),
        // A service line of a site; `number` is ETO's ProgramID. A disabled program is listed but cannot be chosen.
        S.table("sys_program", "Program", display: "name", [
            S.string("name", "Name", 100), S.ref("site", "Site", "sys_site"), S.int("number", "Program ID"),
            S.bool("disabled", "Disabled", "false"),
        ], indexes: [["site"], ["number"]]),
        // A user is staff of a site, with roles there (comma-separated).
        S.table("sys_site_member", "Site Member", display: "user", [
            S.ref("user", "User", "sys_user"), S.ref("site", "Site", "sys_site"), S.string("roles", "Roles", 1000),
        ], indexes: [["user"], ["site"]]),
    ]
}
