import DocketModel

/// A table as described by a `sys_db_object` row.
struct TableDefinition: Sendable {
    var name: String
    var label: String
    /// The table this one extends, if any.
    var parent: String?
    /// Whether other tables may extend this one (its hierarchy then carries `sys_class_name`).
    var isExtendable: Bool
    /// Number prefix (`INC`) when records of this table are numbered.
    var numberPrefix: String?
    /// First counter value for new numbers.
    var numberStart: Int = 10001
    /// The fields this table declares itself (not inherited ones).
    var ownFields: [FieldDefinition]
    /// Indexes to create on the hierarchy's physical table: each a list of columns.
    var indexes: [[String]] = []
}

/// A field as described by a `sys_dictionary` row.
struct FieldDefinition: Sendable {
    /// The table that declares the field.
    var table: String
    var name: String
    var label: String
    var type: FieldType
    /// Target table of a reference.
    var reference: String?
    var maxLength: Int = 255
    var mandatory = false
    var readOnly = false
    /// Default for new records; may be a whitelisted `javascript:` dynamic value.
    var defaultValue: String?
    /// Whether this is the table's display field.
    var isDisplay = false

    var columnKind: ColumnKind {
        switch type {
        case .integer, .boolean: return .integer
        case .decimal: return .real
        default: return .text
        }
    }
}

/// One entry of a choice list (`sys_choice`).
struct ChoiceDefinition: Sendable {
    var value: String
    var label: String
    var sequence: Int
}

/// The choice lists of one table, keyed by field name.
typealias ChoiceLists = [String: [ChoiceDefinition]]

/// The `sys_` fields every table has.
enum SystemFields {
    static let names: Set<String> = [
        "sys_id", "sys_created_on", "sys_created_by", "sys_updated_on", "sys_updated_by", "sys_mod_count",
        "sys_class_name",
    ]

    static func definitions(for table: String, extensible: Bool) -> [FieldDefinition] {
        var fields = [
            FieldDefinition(table: table, name: "sys_id", label: "Sys ID", type: .sysID, maxLength: 32),
            FieldDefinition(table: table, name: "sys_created_on", label: "Created", type: .glideDateTime),
            FieldDefinition(table: table, name: "sys_created_by", label: "Created by", type: .string, maxLength: 40),
            FieldDefinition(table: table, name: "sys_updated_on", label: "Updated", type: .glideDateTime),
            FieldDefinition(table: table, name: "sys_updated_by", label: "Updated by", type: .string, maxLength: 40),
            FieldDefinition(table: table, name: "sys_mod_count", label: "Updates", type: .integer),
        ]
        if extensible {
            fields.append(FieldDefinition(table: table, name: "sys_class_name", label: "Class", type: .tableName, maxLength: 80))
        }
        return fields
    }
}
