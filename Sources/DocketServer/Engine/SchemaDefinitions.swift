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
    /// Digits of the number after the prefix (`INC0010001`: 7; Compass's `SAMPL00000001`: 8).
    var numberDigits: Int = 7
    /// The fields this table declares itself (not inherited ones).
    var ownFields: [FieldDefinition]
    /// Indexes to create on the hierarchy's physical table: each a list of columns.
    var indexes: [[String]] = []
}

/// A field as described by a `sys_dictionary` row. A class, because fields are read on every request and
/// passing a reference costs one retain where a struct of strings costs one per string.
final class FieldDefinition: Sendable {
    /// The table that declares the field.
    let table: String
    let name: String
    let label: String
    let type: FieldType
    /// Target table of a reference.
    let reference: String?
    let maxLength: Int
    let mandatory: Bool
    let readOnly: Bool
    /// Default for new records; may be a whitelisted `javascript:` dynamic value.
    let defaultValue: String?
    /// Whether this is the table's display field.
    let isDisplay: Bool
    let columnKind: ColumnKind

    init(
        table: String, name: String, label: String, type: FieldType, reference: String? = nil, maxLength: Int = 255,
        mandatory: Bool = false, readOnly: Bool = false, defaultValue: String? = nil, isDisplay: Bool = false
    ) {
        self.table = table
        self.name = name
        self.label = label
        self.type = type
        self.reference = reference
        self.maxLength = maxLength
        self.mandatory = mandatory
        self.readOnly = readOnly
        self.defaultValue = defaultValue
        self.isDisplay = isDisplay
        switch type {
        case .integer, .boolean: columnKind = .integer
        case .decimal: columnKind = .real
        default: columnKind = .text
        }
    }

    /// The same field declared by another table, or marked as the display field.
    func copy(table: String? = nil, isDisplay: Bool? = nil) -> FieldDefinition {
        FieldDefinition(
            table: table ?? self.table, name: name, label: label, type: type, reference: reference,
            maxLength: maxLength, mandatory: mandatory, readOnly: readOnly, defaultValue: defaultValue,
            isDisplay: isDisplay ?? self.isDisplay
        )
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
