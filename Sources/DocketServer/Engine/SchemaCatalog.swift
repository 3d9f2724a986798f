import Foundation
import DocketModel

/// An immutable snapshot of every table, field and choice list, with the derived facts the engine needs
/// on each request (inherited fields, descendants, physical tables) computed once. Classes, because they are
/// handed around on every request and a reference is cheaper to pass than a struct of collections.
final class SchemaCatalog: Sendable {
    /// A table with everything derived from the hierarchy.
    final class Table: Sendable {
        let definition: TableDefinition
        /// All fields: system fields, then inherited ones (root first), then the table's own.
        let fields: [FieldDefinition]
        let fieldsByName: [String: FieldDefinition]
        /// The root of the hierarchy; its name is the physical SQL table.
        let root: String
        /// This table and every table that extends it, at any depth.
        let descendants: [String]
        /// This table and its ancestors, nearest first.
        let ancestry: [String]
        let displayField: String?
        /// What a read of every field returns: all fields in order (passwords as a mask).
        let readableColumns: [ResultColumn]

        init(
            definition: TableDefinition, fields: [FieldDefinition], fieldsByName: [String: FieldDefinition],
            root: String, descendants: [String], ancestry: [String], displayField: String?,
            readableColumns: [ResultColumn]
        ) {
            self.definition = definition
            self.fields = fields
            self.fieldsByName = fieldsByName
            self.root = root
            self.descendants = descendants
            self.ancestry = ancestry
            self.displayField = displayField
            self.readableColumns = readableColumns
        }

        var name: String { definition.name }
        var label: String { definition.label }
        var physicalTable: String { root }
        /// Whether rows of this table carry `sys_class_name`.
        var isInHierarchy: Bool { fieldsByName["sys_class_name"] != nil }
        var journalFields: [FieldDefinition] { fields.filter { $0.type == .journal } }

        func field(_ name: String) -> FieldDefinition? { fieldsByName[name] }
    }

    private let tablesByName: [String: Table]
    private let choicesByTable: [String: ChoiceLists]
    /// Every field of each hierarchy (all descendants' columns), by root name.
    private let hierarchyFields: [String: [String: FieldDefinition]]
    /// State models by the table that declares them.
    private let stateModels: [String: StateModel]

    /// The tables the catalog is read from: a committed change to any of them reloads it.
    static let sourceTables: Set<String> = [
        "sys_db_object", "sys_dictionary", "sys_choice", "sys_number", "sys_wf_state", "sys_wf_action", "sys_wf_field",
    ]

    init(tables definitions: [TableDefinition], choices: [String: ChoiceLists], stateModels: [String: StateModel] = [:]) {
        let byName = Dictionary(definitions.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var children: [String: [String]] = [:]
        for definition in definitions {
            if let parent = definition.parent, byName[parent] != nil {
                children[parent, default: []].append(definition.name)
            }
        }
        func ancestry(of name: String) -> [String] {
            var chain: [String] = []
            var current: String? = name
            while let table = current, let definition = byName[table], !chain.contains(table) {
                chain.append(table)
                current = definition.parent
            }
            return chain
        }
        func descendants(of name: String) -> [String] {
            var result = [name]
            var index = 0
            while index < result.count {
                result += (children[result[index]] ?? []).filter { !result.contains($0) }
                index += 1
            }
            return result
        }
        var tables: [String: Table] = [:]
        for definition in definitions {
            let chain = ancestry(of: definition.name)
            let root = chain.last ?? definition.name
            let extensible = chain.count > 1 || (byName[root]?.isExtendable ?? false)
            var fields = SystemFields.definitions(for: root, extensible: extensible)
            for table in chain.reversed() { fields += byName[table]?.ownFields ?? [] }
            var seen = Set<String>()
            fields = fields.filter { seen.insert($0.name).inserted }
            let fieldsByName = Dictionary(fields.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
            let display = fields.first(where: \.isDisplay)?.name
                ?? (fieldsByName["name"] != nil ? "name" : fieldsByName["number"] != nil ? "number" : nil)
            tables[definition.name] = Table(
                definition: definition, fields: fields, fieldsByName: fieldsByName, root: root,
                descendants: descendants(of: definition.name), ancestry: chain, displayField: display,
                readableColumns: fields.map { ResultColumn(name: $0.name, field: $0) }
            )
        }
        var hierarchy: [String: [String: FieldDefinition]] = [:]
        for table in tables.values {
            for field in table.fields where hierarchy[table.root]?[field.name] == nil {
                hierarchy[table.root, default: [:]][field.name] = field
            }
        }
        self.tablesByName = tables
        self.choicesByTable = choices
        self.hierarchyFields = hierarchy
        self.stateModels = stateModels
    }

    /// The state model a table follows: its own, or the nearest ancestor's.
    func stateModel(for table: Table) -> StateModel? {
        for name in table.ancestry {
            if let model = stateModels[name] { return model }
        }
        return nil
    }

    /// The table with this name, or nil when it does not exist.
    func table(_ name: String) -> Table? { tablesByName[name] }

    /// Every table, by name.
    var tables: [Table] { tablesByName.values.sorted { $0.name < $1.name } }

    /// A field of the table's whole hierarchy (including columns of child tables).
    func hierarchyField(_ name: String, in table: Table) -> FieldDefinition? {
        hierarchyFields[table.root]?[name]
    }

    /// Every column of a physical table, for creating it.
    func physicalColumns(root: String) -> [FieldDefinition] {
        (hierarchyFields[root] ?? [:]).values.filter { $0.type.isStored }.sorted { $0.name < $1.name }
    }

    /// Roots of hierarchies, one per physical table.
    var roots: [Table] { tablesByName.values.filter { $0.root == $0.name }.sorted { $0.name < $1.name } }

    /// The choice list of a field as seen from a table (a child's own list overrides its parent's).
    func choices(for field: String, in table: Table) -> [ChoiceDefinition]? {
        for name in table.ancestry {
            if let list = choicesByTable[name]?[field] { return list }
        }
        return nil
    }

    /// The label of a choice value, or nil when the field has no such choice.
    func choiceLabel(_ value: String, field: String, in table: Table) -> String? {
        choices(for: field, in: table)?.first { $0.value == value }?.label
    }

    /// The stored value for a choice label (for display-value input and name-value filters).
    func choiceValue(forLabel label: String, field: String, in table: Table) -> String? {
        choices(for: field, in: table)?.first { $0.label.caseInsensitiveCompare(label) == .orderedSame }?.value
    }
}
