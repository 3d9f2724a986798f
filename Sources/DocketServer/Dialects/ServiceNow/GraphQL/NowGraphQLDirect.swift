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
enum NowGraphQLDirect {
    /// Wrapper fields answered here (those without arguments or further selections).
    static let leaves: Set<String> = ["value", "displayValue", "label", "internalType", "hasValue", "isNil", "isMandatory"]

    private struct Unsupported: Error {}

    /// The answer's `data`, or nil when the document is not of the plain shape.
    static func execute(
        _ document: Document, operationName: String?, variables: [String: Map], context: NowGraphQLSchema.Context
    ) async -> JSONValue? {
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
            var data: OrderedDictionary<String, JSONValue> = [:]
            for root in try fields(of: operation.selectionSet) {
                guard root.name.value == "GlideRecord_Query", root.arguments.isEmpty, let set = root.selectionSet else {
                    return nil
                }
                var tables: OrderedDictionary<String, JSONValue> = [:]
                for tableField in try fields(of: set) {
                    tables[key(tableField)] = try await table(tableField, variables: variables, context: context)
                }
                data[key(root)] = .object(tables)
            }
            return .object(data)
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

    private static func table(_ field: Field, variables: [String: Map], context: NowGraphQLSchema.Context) async throws
        -> JSONValue
    {
        guard let set = field.selectionSet else { throw Unsupported() }
        var arguments: OrderedDictionary<String, Map> = [:]
        for argument in field.arguments { arguments[argument.name.value] = try value(argument.value, variables: variables) }
        let wanted = try fields(of: set)
        // Decide everything that could send the document to the library before any work is done.
        var resultFields: [(key: String, columns: [(key: String, column: String, leaves: [(key: String, name: String)])])?] = []
        for part in wanted {
            switch part.name.value {
            case "_rowCount":
                guard part.arguments.isEmpty, part.selectionSet == nil else { throw Unsupported() }
                resultFields.append(nil)
            case "_results":
                guard part.arguments.isEmpty, let rows = part.selectionSet else { throw Unsupported() }
                var columns: [(key: String, column: String, leaves: [(key: String, name: String)])] = []
                for column in try fields(of: rows) {
                    guard column.arguments.isEmpty, let inner = column.selectionSet else { throw Unsupported() }
                    let leaves = try fields(of: inner).map { leaf -> (key: String, name: String) in
                        guard leaf.arguments.isEmpty, leaf.selectionSet == nil, Self.leaves.contains(leaf.name.value) else {
                            throw Unsupported()
                        }
                        return (key(leaf), leaf.name.value)
                    }
                    columns.append((key(column), column.name.value, leaves))
                }
                resultFields.append((key(part), columns))
            default: throw Unsupported()
            }
        }
        let results = try await NowGraphQLSchema.query(field.name.value, args: .dictionary(arguments), context: context)
        let catalog = context.store.catalog
        var byName: [String: ResultColumn] = [:]
        for column in results.page.columns { byName[column.name] = column }
        var answer: OrderedDictionary<String, JSONValue> = [:]
        for (part, spec) in zip(wanted, resultFields) {
            guard let spec else {
                answer[key(part)] = results.page.total.map { .integer($0) } ?? .null
                continue
            }
            var cells = 0
            var rows: [JSONValue] = []
            rows.reserveCapacity(results.page.records.count)
            for record in results.page.records {
                var row: OrderedDictionary<String, JSONValue> = [:]
                for column in spec.columns {
                    guard let resolved = byName[column.column] else {
                        row[column.key] = .null
                        continue
                    }
                    // Decimals would need the library's number formatting: leave them to it.
                    if resolved.field.type == .decimal { throw Unsupported() }
                    cells += 1
                    if cells > NowGraphQLSchema.Budget.cells { throw Unsupported() }
                    let cell = NowGraphQLSchema.Cell(column: resolved, record: record, renderer: results.renderer)
                    let isChoice = catalog.choices(for: resolved.field.name, in: results.table) != nil
                    var wrapper: OrderedDictionary<String, JSONValue> = [:]
                    for leaf in column.leaves { wrapper[leaf.key] = NowGraphQLSchema.leaf(leaf.name, of: cell, isChoice: isChoice) }
                    row[column.key] = .object(wrapper)
                }
                rows.append(.object(row))
            }
            answer[spec.key] = .array(rows)
        }
        return .object(answer)
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
