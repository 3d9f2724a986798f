import DocketModel

/// How a Compass record type maps onto an engine table: each Compass field (name, type) and where its value
/// comes from. Fields are listed sorted case-insensitively by name, as Compass lists them, which puts the stock
/// app's positional reads in place: `fields[5]` Headline, `fields[7]` id, `fields[24]` State.
struct CompassRecordType: Sendable {
    enum Source: Sendable {
        /// A stored field, as its value (text, numbers, dates).
        case value(String)
        /// A choice field, as its label.
        case choice(String)
        /// A reference, as a field of the referenced record (a user's login, a project's name).
        case reference(String, display: String)
        /// The record's `state`, as its label.
        case state
        /// The numeric dbid derived from the display id.
        case dbid
        /// The record type's name.
        case recordType
        /// A new journal entry (writing); empty when read, as Compass's input box is.
        case journal(String)
        /// The journal's entries as one log, newest first (Compass's Notes_Log, read only).
        case notesLog(String)
        /// Whether the record is active ("1"/"0").
        case active
        /// Whether the record is a duplicate ("1"/"0").
        case isDuplicate
        /// Nothing Docket keeps: always empty.
        case none
    }

    struct Field: Sendable {
        var name: String
        var type: String
        var source: Source
        var helpText = ""

        /// The engine field behind it, when it has one that a write may set.
        var engineField: String? {
            switch source {
            case .value(let name), .choice(let name), .reference(let name, _), .journal(let name): return name
            case .state: return "state"
            default: return nil
            }
        }
    }

    var name: String
    var table: String
    /// The number prefix of display ids (`SAMPL00000001`); dbids are `dbidBase` plus the number.
    var dbidBase: Int
    var fields: [Field]

    func field(_ name: String) -> Field? { fields.first { $0.name.caseInsensitiveCompare(name) == .orderedSame } }

    /// Fields to read from the engine for one record (dot-walks included).
    var engineFields: [String] {
        var names: [String] = ["sys_id", "number", "state", "active", "sys_mod_count", "unduplicate_state"]
        for field in fields {
            switch field.source {
            case .value(let name), .choice(let name): names.append(name)
            case .reference(let name, let display): names += [name, name + "." + display]
            default: break
            }
        }
        return names
    }

    static let defect = CompassRecordType(
        name: "Defect", table: "defect", dbidBase: 33_554_432,
        fields: [
            Field(name: "Attachments", type: "ATTACHMENT_LIST", source: .none),
            Field(name: "customer", type: "REFERENCE_LIST", source: .none),
            Field(name: "dbid", type: "DBID", source: .dbid),
            Field(name: "Description", type: "MULTILINE_STRING", source: .value("description")),
            Field(name: "duplicate_of", type: "REFERENCE", source: .reference("duplicate_of", display: "number")),
            Field(name: "Headline", type: "SHORT_STRING", source: .value("short_description")),
            Field(name: "history", type: "JOURNAL", source: .none),
            Field(name: "id", type: "ID", source: .value("number")),
            Field(name: "is_active", type: "INT", source: .active),
            Field(name: "is_duplicate", type: "INT", source: .isDuplicate),
            Field(name: "Keywords", type: "MULTILINE_STRING", source: .choice("keywords")),
            Field(name: "lock_version", type: "INT", source: .value("sys_mod_count")),
            Field(name: "locked_by", type: "INT", source: .none),
            Field(name: "Note_Entry", type: "MULTILINE_STRING", source: .journal("comments")),
            Field(name: "Notes_Log", type: "MULTILINE_STRING", source: .notesLog("comments")),
            Field(name: "old_id", type: "SHORT_STRING", source: .none),
            Field(name: "Owner", type: "REFERENCE", source: .reference("assigned_to", display: "user_name")),
            Field(name: "Priority", type: "SHORT_STRING", source: .choice("priority")),
            Field(name: "Project", type: "REFERENCE", source: .reference("project", display: "name")),
            Field(name: "ratl_keysite", type: "INT", source: .none),
            Field(name: "ratl_mastership", type: "REFERENCE", source: .none),
            Field(name: "record_type", type: "RECORDTYPE", source: .recordType),
            Field(name: "Resolution", type: "SHORT_STRING", source: .choice("resolution")),
            Field(name: "Severity", type: "SHORT_STRING", source: .choice("severity")),
            Field(name: "State", type: "STATE", source: .state),
            Field(name: "Submit_Date", type: "DATE_TIME", source: .value("opened_at")),
            Field(name: "Submitter", type: "REFERENCE", source: .reference("opened_by", display: "user_name")),
            Field(name: "Symptoms", type: "MULTILINE_STRING", source: .choice("symptoms")),
            Field(name: "unduplicate_state", type: "SHORT_STRING", source: .value("unduplicate_state")),
            Field(name: "version", type: "INT", source: .value("sys_mod_count")),
        ]
    )

    /// The Compass name of the field stored in a column (`short_description` → `Headline`); the column itself when
    /// no Compass field shows it.
    func fieldName(ofColumn column: String) -> String {
        let field = fields.first { field in
            switch field.source {
            case .value(let name), .choice(let name), .reference(let name, _), .journal(let name): return name == column
            case .state: return column == "state"
            default: return false
            }
        }
        return field?.name ?? column
    }

    /// The display id's number as a dbid, and back.
    func dbid(ofNumber number: String) -> String? {
        guard let digits = Int(number.drop { !$0.isNumber }), digits >= 0, digits < Int(Int32.max) else { return nil }
        return String(dbidBase + digits)
    }

    func number(ofDbid dbid: String, prefix: String, digits: Int) -> String? {
        guard let value = Int(dbid), value > dbidBase, value - dbidBase < Int(Int32.max) else { return nil }
        let text = String(value - dbidBase)
        return prefix + String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}

/// The repositories and databases this server offers to Compass clients: one repository, `SampleRepository`,
/// with the database `SAMPL` holding defects.
enum CompassDirectory {
    static let repositories = ["SampleRepository"]
    static let databases: [(name: String, dbId: String, description: String)] = [
        ("SAMPL", "16777217", "Sample defect tracking database"),
    ]
    static let recordTypes = [CompassRecordType.defect]

    static func repository(_ name: String) -> String? {
        repositories.first { $0.caseInsensitiveCompare(name) == .orderedSame }
    }

    static func database(_ name: String) -> (name: String, dbId: String, description: String)? {
        databases.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }
    }

    static func recordType(_ name: String) -> CompassRecordType? {
        recordTypes.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }
    }
}

extension SchemaCatalog {
    /// How a table's records are numbered: the prefix and digits of the nearest table in its ancestry that numbers
    /// them (a defect's `SAMPL` and 8); nil when none does.
    func numbering(of table: Table) -> (prefix: String, digits: Int)? {
        guard let owner = table.ancestry.lazy.compactMap({ self.table($0) }).first(where: { $0.definition.numberPrefix != nil }),
            let prefix = owner.definition.numberPrefix
        else { return nil }
        return (prefix, owner.definition.numberDigits)
    }
}
