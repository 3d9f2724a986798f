/// The type of a field, as recorded in `sys_dictionary.internal_type`.
///
/// Raw values are ServiceNow's internal type names, so `FieldType(rawValue: "glide_date_time")` works.
public enum FieldType: String, Sendable, CaseIterable, Codable {
    case string
    case integer
    case decimal
    case boolean
    case glideDateTime = "glide_date_time"
    case glideDate = "glide_date"
    case reference
    case choice
    /// A journal field (`comments`, `work_notes`): entries live in `sys_journal_field`, not in a column.
    case journal = "journal_input"
    case sysID = "GUID"
    /// A password: stored as a bcrypt hash, never returned by any API.
    case password = "password2"
    /// A comma-separated list of sys_ids.
    case glideList = "glide_list"
    /// A table name (`sys_class_name`).
    case tableName = "sys_class_name"

    /// Whether values of this type are kept in a column of the record's table.
    public var isStored: Bool { self != .journal }
}
