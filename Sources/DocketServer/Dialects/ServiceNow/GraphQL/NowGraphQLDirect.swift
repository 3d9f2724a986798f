import DocketModel
import Foundation
import GraphQL
import OrderedCollections

/// Runs the common shape of `GlideRecord_Query` documents without the GraphQL library's executor, which costs
/// a child task per field value (tens of microseconds each: a 100-record answer took twenty times the Table
/// API's time). The library still parses and validates every document; only documents of this plain shape run
/// here, and their answers are byte for byte what the library would answer (tested on the same documents):
///
/// ```graphql
/// query { GlideRecord_Query { <alias>: <table>(<arguments>) { _rowCount _results { <column> { value displayValue … } } } } }
/// ```
///
/// Anything else (mutations, fragments, directives, `__typename`, `_reference`, `_choices`, repeated response keys,
/// decimal columns, variables without a value, a budget exceeded, any error) returns nil, and the library runs
/// the document as usual.
///
/// Subscriptions of the same plain shape render their results here too (``subscriptionPlan(_:operationName:catalog:)``,
/// ``render(_:_:catalog:)``): `subscription { <table>(<arguments>) { sequence change … record { <column> { value … } }
/// previous { … } } }`.
enum NowGraphQLDirect {
    /// Wrapper fields answered here (those without arguments or further selections).
    static let leaves: Set<String> = ["value", "displayValue", "label", "internalType", "hasValue", "isNil", "isMandatory"]

    private struct Unsupported: Error {}

    /// A planned table field: what to fetch and which members to write.
    private struct TablePlan {
        let key: String
        let table: String
        let arguments: Map
        /// `_rowCount` (nil) or `_results` with its columns, in selection order.
        let parts: [(key: String, columns: [ColumnPlan]?)]
    }

    struct ColumnPlan: Sendable {
        let key: [UInt8]
        let column: String
        let leaves: [(key: [UInt8], name: String)]
    }

    /// The whole answer (`{"data":…}`), or nil when the document is not of the plain shape.
    static func execute(
        _ document: Document, operationName: String?, variables: [String: Map], context: NowGraphQLSchema.Context
    ) async -> [UInt8]? {
        do {
            let operations = document.definitions.compactMap { $0 as? OperationDefinition }
            // Fragments, or a choice among several operations, go to the library.
            guard operations.count == document.definitions.count else { return nil }
            let operation: OperationDefinition
            if let operationName {
                guard let named = operations.first(where: { $0.name?.value == operationName }) else { return nil }
                operation = named
            } else {
                guard operations.count == 1 else { return nil }
                operation = operations[0]
            }
            guard operation.operation == .query, operation.directives.isEmpty,
                try variablesAreSimple(operation.variableDefinitions, given: variables)
            else { return nil }
            // Everything that could send the document to the library is decided before any work is done.
            var roots: [(key: String, tables: [TablePlan])] = []
            for root in try fields(of: operation.selectionSet) {
                guard root.name.value == "GlideRecord_Query", root.arguments.isEmpty, let set = root.selectionSet else {
                    return nil
                }
                roots.append((key(root), try fields(of: set).map { try plan($0, variables: variables) }))
            }
            var writer = JSONWriter(capacity: 16 * 1024)
            writer.beginObject()
            writer.key("data")
            writer.beginObject()
            for root in roots {
                writer.key(root.key)
                writer.beginObject()
                for table in root.tables {
                    writer.key(table.key)
                    try await write(table, context: context, to: &writer)
                }
                writer.endObject()
            }
            writer.endObject()
            writer.endObject()
            return writer.bytes
        } catch {
            return nil
        }
    }

    /// Whether every declared variable is a String, Int or Boolean given as such (coercion, defaults and missing
    /// values are the library's to judge).
    private static func variablesAreSimple(_ definitions: [VariableDefinition], given: [String: Map]) throws -> Bool {
        for definition in definitions {
            guard definition.defaultValue == nil, definition.directives.isEmpty else { return false }
            var type: any GraphQL.`Type` = definition.type
            if let nonNull = type as? NonNullType { type = nonNull.type }
            guard let named = type as? NamedType, let value = given[definition.variable.name.value] else { return false }
            switch (named.name.value, value) {
            case ("String", .string), ("Boolean", .bool): continue
            case ("Int", .number(let number)):
                guard let int = Int(exactly: number.doubleValue), Int32(exactly: int) != nil else { return false }
            default: return false
            }
        }
        return true
    }

    /// The fields of a selection set: only plain fields, each response key once.
    private static func fields(of set: SelectionSet) throws -> [Field] {
        var seen = Set<String>()
        var fields: [Field] = []
        for selection in set.selections {
            guard let field = selection as? Field, field.directives.isEmpty, !field.name.value.hasPrefix("__"),
                seen.insert(key(field)).inserted
            else { throw Unsupported() }
            fields.append(field)
        }
        return fields
    }

    private static func key(_ field: Field) -> String { field.alias?.value ?? field.name.value }

    private static func plan(_ field: Field, variables: [String: Map]) throws -> TablePlan {
        guard let set = field.selectionSet else { throw Unsupported() }
        var arguments: OrderedDictionary<String, Map> = [:]
        for argument in field.arguments { arguments[argument.name.value] = try value(argument.value, variables: variables) }
        var parts: [(key: String, columns: [ColumnPlan]?)] = []
        for part in try fields(of: set) {
            guard part.arguments.isEmpty else { throw Unsupported() }
            switch part.name.value {
            case "_rowCount":
                guard part.selectionSet == nil else { throw Unsupported() }
                parts.append((key(part), nil))
            case "_results":
                guard let rows = part.selectionSet else { throw Unsupported() }
                parts.append((key(part), try fields(of: rows).map(columnPlan)))
            default: throw Unsupported()
            }
        }
        return TablePlan(key: key(field), table: field.name.value, arguments: .dictionary(arguments), parts: parts)
    }

    /// A column wrapper selected with plain leaves only (`number { value displayValue }`).
    private static func columnPlan(_ column: Field) throws -> ColumnPlan {
        guard column.arguments.isEmpty, let inner = column.selectionSet else { throw Unsupported() }
        let leaves = try fields(of: inner).map { leaf -> (key: [UInt8], name: String) in
            guard leaf.arguments.isEmpty, leaf.selectionSet == nil, Self.leaves.contains(leaf.name.value) else {
                throw Unsupported()
            }
            return (JSONWriter.encodedKey(key(leaf)), leaf.name.value)
        }
        return ColumnPlan(key: JSONWriter.encodedKey(key(column)), column: column.name.value, leaves: leaves)
    }

    /// One column of one record, as its plan selects it: null when the record has no such column; false when the
    /// answer has reached its budget of cells (the library answers it then).
    private static func writeCell(
        _ plan: ColumnPlan, column: ResultColumn?, record: Record, renderer: RecordRenderer, isChoice: Bool,
        cells: inout Int, to writer: inout JSONWriter
    ) -> Bool {
        writer.key(encoded: plan.key)
        guard let column else {
            writer.value(.null)
            return true
        }
        cells += 1
        if cells > NowGraphQLSchema.Budget.cells { return false }
        let cell = NowGraphQLSchema.Cell(column: column, record: record, renderer: renderer)
        writer.beginObject()
        for leaf in plan.leaves {
            writer.key(encoded: leaf.key)
            writer.value(NowGraphQLSchema.leaf(leaf.name, of: cell, isChoice: isChoice))
        }
        writer.endObject()
        return true
    }

    private static func write(_ plan: TablePlan, context: NowGraphQLSchema.Context, to writer: inout JSONWriter) async throws {
        // Only the selected columns are read (and only their references and journals looked up).
        var selected = ["sys_id"]
        for part in plan.parts { for column in part.columns ?? [] { selected.append(column.column) } }
        let results = try await NowGraphQLSchema.query(plan.table, args: plan.arguments, context: context, fields: selected)
        let catalog = context.store.catalog
        var byName: [String: ResultColumn] = [:]
        for column in results.page.columns { byName[column.name] = column }
        writer.beginObject()
        var cells = 0
        for part in plan.parts {
            writer.key(part.key)
            guard let columns = part.columns else {
                writer.value(results.page.total.map { .integer($0) } ?? .null)
                continue
            }
            // Per column, once: the engine's column and whether it has a choice list.
            let resolved = try columns.map { plan -> (plan: ColumnPlan, column: ResultColumn?, isChoice: Bool) in
                guard let column = byName[plan.column] else { return (plan, nil, false) }
                // Decimals would need the library's number formatting: leave them to it.
                if column.field.type == .decimal { throw Unsupported() }
                return (plan, column, catalog.choices(for: column.field.name, in: results.table) != nil)
            }
            writer.beginArray()
            for record in results.page.records {
                writer.beginObject()
                for (plan, column, isChoice) in resolved {
                    guard writeCell(
                        plan, column: column, record: record, renderer: results.renderer, isChoice: isChoice,
                        cells: &cells, to: &writer
                    ) else { throw Unsupported() }
                }
                writer.endObject()
            }
            writer.endArray()
        }
        writer.endObject()
    }

    /// A subscription document of the plain shape, planned once when the subscription starts.
    struct SubscriptionPlan: Sendable {
        enum Part: Sendable {
            /// A field of the change itself (`sequence`, `change`, `operation`, `table`, `sys_id`, `fields`, `user`,
            /// `time`).
            case scalar(key: [UInt8], name: String)
            /// `record` or `previous`, with its columns in selection order.
            case row(key: [UInt8], previous: Bool, columns: [ColumnPlan], choices: [Bool])
        }

        let key: [UInt8]
        let parts: [Part]
    }

    private static let changeScalars: Set<String> = ["sequence", "change", "operation", "table", "sys_id", "fields", "user", "time"]

    /// The plan of a subscription document, or nil when it is not of the plain shape (the library renders it).
    static func subscriptionPlan(_ document: Document, operationName: String?, catalog: SchemaCatalog) -> SubscriptionPlan? {
        do {
            let operations = document.definitions.compactMap { $0 as? OperationDefinition }
            guard operations.count == document.definitions.count else { return nil }
            guard let operation = operationName.map({ name in operations.first { $0.name?.value == name } })
                ?? (operations.count == 1 ? operations.first : nil),
                operation.operation == .subscription, operation.directives.isEmpty,
                operation.variableDefinitions.allSatisfy({ $0.defaultValue == nil && $0.directives.isEmpty })
            else { return nil }
            let roots = try fields(of: operation.selectionSet)
            guard roots.count == 1, let root = roots.first, let set = root.selectionSet,
                let table = catalog.table(root.name.value)
            else { return nil }
            var parts: [SubscriptionPlan.Part] = []
            for part in try fields(of: set) {
                guard part.arguments.isEmpty else { return nil }
                let name = part.name.value
                if changeScalars.contains(name) {
                    guard part.selectionSet == nil else { return nil }
                    parts.append(.scalar(key: JSONWriter.encodedKey(key(part)), name: name))
                    continue
                }
                guard name == "record" || name == "previous", let rows = part.selectionSet else { return nil }
                var columns: [ColumnPlan] = []
                var choices: [Bool] = []
                for column in try fields(of: rows) {
                    guard let field = table.field(column.name.value), field.type != .decimal, field.type != .password else {
                        return nil
                    }
                    columns.append(try columnPlan(column))
                    // The wrapper the library gives the column: a choice wrapper when the subscribed table lists choices.
                    choices.append(catalog.choices(for: field.name, in: table) != nil)
                }
                parts.append(.row(key: JSONWriter.encodedKey(key(part)), previous: name == "previous", columns: columns, choices: choices))
            }
            return SubscriptionPlan(key: JSONWriter.encodedKey(key(root)), parts: parts)
        } catch {
            return nil
        }
    }

    /// One change as the subscription's result (`{"data":…}`), byte for byte what the library answers; nil when the
    /// change needs the library after all (more cells than a result's budget).
    static func render(_ plan: SubscriptionPlan, _ change: LiveChange) -> [UInt8]? {
        var writer = JSONWriter(capacity: 2 * 1024)
        var cells = 0
        writer.beginObject()
        writer.key("data")
        writer.beginObject()
        writer.key(encoded: plan.key)
        writer.beginObject()
        let event = change.change.event
        for part in plan.parts {
            switch part {
            case .scalar(let key, let name):
                writer.key(encoded: key)
                switch name {
                case "sequence": writer.value(.integer(event.sequence))
                case "change": writer.string(change.change.kind.rawValue)
                case "operation": writer.string(event.operation.rawValue)
                case "table": writer.string(event.table)
                case "sys_id": writer.string(event.sysID)
                case "fields": writer.value(.array(event.fields.map(JSONValue.string)))
                case "user": writer.string(event.userName)
                default: writer.string(event.time)
                }
            case .row(let key, let previous, let columns, let choices):
                writer.key(encoded: key)
                guard let row = previous ? change.previous : change.record else {
                    writer.value(.null)
                    continue
                }
                writer.beginObject()
                for (plan, isChoice) in zip(columns, choices) {
                    guard writeCell(
                        plan, column: row.columns[plan.column], record: row.record, renderer: row.renderer, isChoice: isChoice,
                        cells: &cells, to: &writer
                    ) else { return nil }
                }
                writer.endObject()
            }
        }
        writer.endObject()
        writer.endObject()
        writer.endObject()
        return writer.bytes
    }

    /// An argument's value: literals, or variables that were given (defaults and coercion are the library's).
    private static func value(_ node: Value, variables: [String: Map]) throws -> Map {
        switch node {
        case let variable as Variable:
            guard let value = variables[variable.name.value] else { throw Unsupported() }
            return value
        case let string as StringValue: return .string(string.value)
        case let int as IntValue:
            guard let number = Int(int.value) else { throw Unsupported() }
            return .int(number)
        case let boolean as BooleanValue: return .bool(boolean.value)
        case is NullValue: return .null
        case let object as ObjectValue:
            var fields: OrderedDictionary<String, Map> = [:]
            for field in object.fields { fields[field.name.value] = try value(field.value, variables: variables) }
            return .dictionary(fields)
        default: throw Unsupported()
        }
    }
}
