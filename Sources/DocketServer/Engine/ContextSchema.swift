import DocketModel

/// The context hierarchy of the base schema: enterprises (tenants), their sites, the programs of each site, and the
/// users who are staff of a site. ETO's enterprise → site → program is this hierarchy as it is; a Compass
/// repository and database, or a ServiceNow domain, are the same idea. Like the rest of ``BaseSchema`` these tables
/// are catalog data; only administrators change them through the generic APIs. Enterprises, sites and programs are
/// scoped like participants (`sys_domain`, an enterprise's being itself): staff read their own enterprise's.
enum ContextSchema {
    typealias S = BaseSchema

    static let tables: [TableDefinition] = [
        // A tenant; `guid` is how ETO clients name it (its `enterpriseGuid`).
        S.table("sys_enterprise", "Enterprise", display: "name", [
            S.string("name", "Name", 100), S.string("guid", "GUID", 36), S.bool("active", "Active", "true"), scope,
        ], indexes: [["guid"]]),
        // An office or service location of an enterprise; `number` is ETO's SiteID.
        S.table("sys_site", "Site", display: "name", [
            S.string("name", "Name", 100), S.ref("enterprise", "Enterprise", "sys_enterprise"), S.int("number", "Site ID"),
            S.bool("active", "Active", "true"), scope,
        ], indexes: [["enterprise"], ["number"]]),
        // A service line of a site; `number` is ETO's ProgramID. A disabled program is listed but cannot be chosen.
        S.table("sys_program", "Program", display: "name", [
            S.string("name", "Name", 100), S.ref("site", "Site", "sys_site"), S.int("number", "Program ID"),
            S.bool("disabled", "Disabled", "false"), scope,
        ], indexes: [["site"], ["number"]]),
        // A user is staff of a site, with roles there (comma-separated).
        S.table("sys_site_member", "Site Member", display: "user", [
            S.ref("user", "User", "sys_user"), S.ref("site", "Site", "sys_site"), S.string("roles", "Roles", 1000),
        ], indexes: [["user"], ["site"]]),
        participant, enrollment, touchpoint, response,
    ]

    /// A TouchPoint: a form staff fill in about a participant. `elements` holds its questions as JSON
    /// (`[{"ElementID", "ElementType", "Stimulus", "IsRequired", "Choices": [{"TouchPointElementChoiceID", "ChoiceText"}]}]`;
    /// element types 4 single choice, 5 text, 9 date). Scoped like participants.
    static let touchpoint: TableDefinition = {
        var table = S.table("eto_touchpoint", "TouchPoint", display: "name", prefix: "", start: 1001, [
            S.string("number", "TouchPoint ID", 40), S.string("name", "Name", 200), S.string("elements", "Elements", 65_536),
            scope,
        ], indexes: [["sys_domain"], ["number"]])
        table.numberDigits = 1
        return table
    }()

    /// A filled-in TouchPoint about a participant, in a program; `answers` holds its response elements as JSON (so
    /// that a response is written, and its event logged, as one record).
    static let response: TableDefinition = {
        var table = S.table("eto_response", "TouchPoint Response", display: "number", prefix: "", start: 10001, [
            S.string("number", "Response ID", 40), S.ref("touchpoint", "TouchPoint", "eto_touchpoint"),
            S.ref("participant", "Participant", "eto_participant"), S.ref("program", "Program", "sys_program"),
            S.glideDateTime("response_date", "Response date"), S.string("answers", "Answers", 65_536), scope,
        ], indexes: [["sys_domain"], ["participant"], ["touchpoint"]])
        table.numberDigits = 1
        return table
    }()

    /// A participant's enrollment in a program (scoped like participants); `number` is its ETO id.
    static let enrollment: TableDefinition = {
        var table = S.table("eto_enrollment", "Enrollment", display: "number", prefix: "", start: 101, [
            S.string("number", "Enrollment ID", 40), S.ref("participant", "Participant", "eto_participant"),
            S.ref("program", "Program", "sys_program"), S.string("start_date", "Start date", 10),
            S.string("projected_end_date", "Projected end date", 10), S.string("end_date", "End date", 10), scope,
        ], indexes: [["sys_domain"], ["participant"], ["program"]])
        table.numberDigits = 1
        return table
    }()

    /// A person a site serves (ETO's participant). Scoped: `sys_domain` is the enterprise it belongs to, and the
    /// engine shows it to staff of that enterprise only, through every API. `number` is ETO's participant id (CLID),
    /// taken from the engine's counter (unpadded, from 10001); its SubjectID is 100000 more.
    static let participant: TableDefinition = {
        var table = S.table("eto_participant", "Participant", display: "last_name", prefix: "", start: 10001, [
            S.string("number", "Participant ID", 40), S.string("first_name", "First name", 100),
            S.string("last_name", "Last name", 100), S.string("date_of_birth", "Date of birth", 10),
            S.string("address1", "Address", 200), S.string("zip_code", "ZIP code", 20), S.ref("site", "Site", "sys_site"),
            scope,
        ], indexes: [["sys_domain"], ["site"], ["number"]])
        table.numberDigits = 1
        return table
    }()

    /// The field that scopes a table's records to an enterprise.
    static let scope = S.ref("sys_domain", "Domain", "sys_enterprise")
}
