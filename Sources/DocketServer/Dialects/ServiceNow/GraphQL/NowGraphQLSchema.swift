import DocketModel
import Foundation
import GraphQL
import OrderedCollections
import Synchronization

/// ServiceNow's GraphQL read schema (spec §7.2), built from the catalog at run time: a `GlideRecord_Query` field
/// per table with `sys_id`, `queryConditions`, `pagination` and `omitCount`; `_rowCount` and `_results`; each
/// column a wrapper object with `value`, `displayValue`, `label` and, by kind, `_reference { … }` or `_choices`.
/// Every read goes through the engine (the same compiler and access rules as the Table API).
enum NowGraphQLSchema {
    /// What resolvers need: the engine, who asks, and the bounds of one request.
    struct Context: Sendable {
        let store: RecordStore
        let caller: Caller
        let maxPageSize: Int
        let budget: Budget
    }

    /// Bounds the work of one request: every column value resolved costs one unit.
    final class Budget: Sendable {
        static let cells = 100_000
        private let used = Atomic<Int>(0)

        func spend() throws {
            if used.add(1, ordering: .relaxed).newValue > Self.cells {
                throw GraphQLError(
                    message: "The result is too large: select fewer fields or fewer records (at most \(Self.cells) values per request)"
                )
            }
        }
    }

    /// A table's answer: a page of records with what their display values need.
    struct Results: Sendable {
        let table: SchemaCatalog.Table
        let page: RecordPage
        let renderer: RecordRenderer
    }

    /// One record of an answer.
    struct Row: Sendable {
        let record: Record
        let columns: [String: ResultColumn]
        let renderer: RecordRenderer
    }

    /// One column of one record.
    struct Cell: Sendable {
        let column: ResultColumn
        let record: Record
        let renderer: RecordRenderer
        var value: String { record[column.name] }
    }

    /// A choice of a choice column.
    struct Choice: Sendable {
        let value: String
        let label: String
    }

    /// The default page size when a query gives no `pagination`.
    static let defaultLimit = 1_000

    static func build(_ catalog: SchemaCatalog) throws -> GraphQLSchema {
        let builder = Builder(catalog: catalog)
        return try builder.schema()
    }

    /// Whether a name can be a GraphQL name.
    static func isValidName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first == "_" || (first.isASCII && first.properties.isAlphabetic) else {
            return false
        }
        return name.unicodeScalars.allSatisfy { $0 == "_" || ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) }
    }

    private final class Builder {
        let catalog: SchemaCatalog
        var rowTypes: [String: GraphQLObjectType] = [:]
        var resultsTypes: [String: GraphQLObjectType] = [:]
        var referenceWrappers: [String: GraphQLObjectType] = [:]
        let long: GraphQLScalarType
        let glideBoolean: GraphQLScalarType
        let pagination: GraphQLInputObjectType
        let choiceType: GraphQLObjectType
        var wrappers: [String: GraphQLObjectType] = [:]

        init(catalog: SchemaCatalog) {
            self.catalog = catalog
            long = try! GraphQLScalarType(
                name: "Long", description: "A 64-bit integer.",
                serialize: { value in
                    if let number = value as? Int { return .int(number) }
                    return try map(from: value)
                },
                parseValue: { $0 }, parseLiteral: { ast in
                    if let int = ast as? IntValue, let number = Int(int.value) { return .int(number) }
                    return .null
                }
            )
            glideBoolean = try! GraphQLScalarType(
                name: "Glide_Boolean", description: "A boolean column's value.",
                serialize: { value in
                    if let flag = value as? Bool { return .bool(flag) }
                    return try map(from: value)
                },
                parseValue: { $0 }, parseLiteral: { ast in (ast as? BooleanValue).map { .bool($0.value) } ?? .null }
            )
            pagination = try! GraphQLInputObjectType(
                name: "Glide_PaginationInputType",
                fields: ["limit": InputObjectField(type: GraphQLInt), "offset": InputObjectField(type: GraphQLInt)]
            )
            choiceType = try! GraphQLObjectType(
                name: "GlideRecord_ChoiceOptionType",
                fields: [
                    "value": GraphQLField(type: GraphQLString) { source, _, _, _ in (source as? Choice)?.value },
                    "displayValue": GraphQLField(type: GraphQLString) { source, _, _, _ in (source as? Choice)?.label },
                    "label": GraphQLField(type: GraphQLString) { source, _, _, _ in (source as? Choice)?.label },
                ]
            )
        }

        func schema() throws -> GraphQLSchema {
            let tables = catalog.tables.filter { NowGraphQLSchema.isValidName($0.name) }
            for table in tables { rowTypes[table.name] = try rowType(table) }
            var tableFields: GraphQLFieldMap = [:]
            for table in tables {
                tableFields[table.name] = GraphQLField(
                    type: try resultsType(table),
                    args: [
                        "sys_id": GraphQLArgument(type: GraphQLString),
                        "queryConditions": GraphQLArgument(type: GraphQLString),
                        "pagination": GraphQLArgument(type: pagination),
                        "omitCount": GraphQLArgument(type: GraphQLBoolean),
                    ],
                    resolve: { _, args, context, _ in
                        try await NowGraphQLSchema.query(table.name, args: args, context: context)
                    }
                )
            }
            let glideRecordQuery = try GraphQLObjectType(name: "GlideRecord_QueryType", fields: tableFields)
            let query = try GraphQLObjectType(
                name: "Query",
                fields: ["GlideRecord_Query": GraphQLField(type: glideRecordQuery) { _, _, _, _ in "GlideRecord_Query" }]
            )
            let mutation = try GraphQLObjectType(
                name: "Mutation",
                fields: [
                    "GlideRecord_Mutation": GraphQLField(type: try mutationType(tables)) { _, _, _, _ in "GlideRecord_Mutation" }
                ]
            )
            return try GraphQLSchema(query: query, mutation: mutation, subscription: try subscriptionType(tables))
        }

        /// Docket's subscriptions (ServiceNow has none): one field per table, `<table>(queryConditions, since)`,
        /// whose results are `Docket_RecordChangeType_<table>`: the sequence, how the record relates to the query
        /// (entered, changed, left, deleted), the operation, and the record (and for a change, the record before it)
        /// with the same column wrappers as queries.
        func subscriptionType(_ tables: [SchemaCatalog.Table]) throws -> GraphQLObjectType {
            var fields: GraphQLFieldMap = [:]
            for table in tables {
                guard let row = rowTypes[table.name] else { continue }
                let change = try GraphQLObjectType(
                    name: "Docket_RecordChangeType_\(table.name)",
                    fields: [
                        "sequence": GraphQLField(type: long) { source, _, _, _ in (source as? LiveChange)?.change.event.sequence },
                        "change": GraphQLField(type: GraphQLString) { source, _, _, _ in (source as? LiveChange)?.change.kind.rawValue },
                        "operation": GraphQLField(type: GraphQLString) { source, _, _, _ in
                            (source as? LiveChange)?.change.event.operation.rawValue
                        },
                        "table": GraphQLField(type: GraphQLString) { source, _, _, _ in (source as? LiveChange)?.change.event.table },
                        "sys_id": GraphQLField(type: GraphQLString) { source, _, _, _ in (source as? LiveChange)?.change.event.sysID },
                        "fields": GraphQLField(type: GraphQLList(GraphQLString)) { source, _, _, _ in
                            (source as? LiveChange)?.change.event.fields
                        },
                        "user": GraphQLField(type: GraphQLString) { source, _, _, _ in (source as? LiveChange)?.change.event.userName },
                        "time": GraphQLField(type: GraphQLString) { source, _, _, _ in (source as? LiveChange)?.change.event.time },
                        "record": GraphQLField(type: row) { source, _, _, _ in (source as? LiveChange)?.record },
                        "previous": GraphQLField(type: row) { source, _, _, _ in (source as? LiveChange)?.previous },
                    ]
                )
                fields[table.name] = GraphQLField(
                    type: change,
                    args: ["queryConditions": GraphQLArgument(type: GraphQLString), "since": GraphQLArgument(type: long)],
                    resolve: { source, args, _, _ in
                        if let probe = source as? ArgumentProbe {
                            probe.found(table: table.name, args: args)
                            return nil
                        }
                        return source as? LiveChange
                    }
                )
            }
            return try GraphQLObjectType(name: "Subscription", fields: fields)
        }

        /// `GlideRecord_Mutation`: `insert_<table>`, `update_<table>` (partial) and `delete_<table>`, one String
        /// argument per column, through the engine's one write path (spec §7.3).
        func mutationType(_ tables: [SchemaCatalog.Table]) throws -> GraphQLObjectType {
            let deleted = try GraphQLObjectType(
                name: "GlideRecord_DeleteMutationOutputType",
                fields: [
                    "modified_count": GraphQLField(type: GraphQLInt) { source, _, _, _ in (source as? Deleted)?.count },
                    "sys_id": GraphQLField(type: GraphQLString) { source, _, _, _ in (source as? Deleted)?.sysID },
                ]
            )
            var fields: GraphQLFieldMap = [:]
            for table in tables where !SchemaAdministration.tables.contains(table.name) {
                var columns: GraphQLArgumentConfigMap = [:]
                for field in table.fields where NowGraphQLSchema.isValidName(field.name) && field.name != "sys_id" {
                    columns[field.name] = GraphQLArgument(type: GraphQLString)
                }
                let results = try resultsType(table)
                let name = table.name
                fields["insert_\(name)"] = GraphQLField(type: results, args: columns, resolve: { _, args, context, _ in
                    try await NowGraphQLSchema.write(.insert, table: name, sysID: nil, args: args, context: context)
                })
                var updateArguments = columns
                updateArguments["sys_id"] = GraphQLArgument(type: GraphQLNonNull(GraphQLString))
                fields["update_\(name)"] = GraphQLField(type: results, args: updateArguments, resolve: { _, args, context, _ in
                    try await NowGraphQLSchema.write(.update, table: name, sysID: args["sys_id"].string, args: args, context: context)
                })
                fields["delete_\(name)"] = GraphQLField(
                    type: deleted, args: ["sys_id": GraphQLArgument(type: GraphQLNonNull(GraphQLString))],
                    resolve: { _, args, context, _ in
                        guard let context = context as? Context, let sysID = args["sys_id"].string else { return nil }
                        try await NowGraphQLSchema.engine { try await context.store.delete(sysID, from: name, caller: context.caller) }
                        return Deleted(count: 1, sysID: sysID)
                    }
                )
            }
            return try GraphQLObjectType(name: "GlideRecord_MutationType", fields: fields)
        }

        /// `GlideRecord_TableResultsType_<table>`.
        func resultsType(_ table: SchemaCatalog.Table) throws -> GraphQLObjectType {
            if let existing = resultsTypes[table.name] { return existing }
            guard let row = rowTypes[table.name] else { throw GraphQLError(message: "No row type for \(table.name)") }
            let type = try GraphQLObjectType(
                name: "GlideRecord_TableResultsType_\(table.name)",
                fields: [
                    "_rowCount": GraphQLField(type: long) { source, _, _, _ in (source as? Results)?.page.total },
                    "_results": GraphQLField(type: GraphQLList(row)) { source, _, _, _ in
                        guard let results = source as? Results else { return nil }
                        let columns = Dictionary(results.page.columns.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
                        return results.page.records.map { Row(record: $0, columns: columns, renderer: results.renderer) }
                    },
                ]
            )
            resultsTypes[table.name] = type
            return type
        }

        /// `GlideRecord_Type_<table>`: one wrapper per column. Fields are resolved lazily, so that rows can refer
        /// to each other through `_reference`.
        func rowType(_ table: SchemaCatalog.Table) throws -> GraphQLObjectType {
            try GraphQLObjectType(name: "GlideRecord_Type_\(table.name)") {
                var fields: GraphQLFieldMap = [:]
                for field in table.fields where NowGraphQLSchema.isValidName(field.name) && field.type != .password {
                    let name = field.name
                    fields[name] = GraphQLField(type: try self.wrapper(for: field, in: table)) { source, _, context, _ in
                        guard let row = source as? Row, let column = row.columns[name] else { return nil }
                        try (context as? Context)?.budget.spend()
                        return Cell(column: column, record: row.record, renderer: row.renderer)
                    }
                }
                return fields
            }
        }

        /// The wrapper type of a column, by kind.
        func wrapper(for field: DocketServer.FieldDefinition, in table: SchemaCatalog.Table) throws -> GraphQLObjectType {
            if field.type == .reference, let target = field.reference, rowTypes[target] != nil {
                if let existing = referenceWrappers[target] { return existing }
                let type = try wrapperType(name: "GlideRecord_ReferenceType_\(target)", value: GraphQLString, extra: [
                    "_reference": GraphQLField(type: rowTypes[target]!) { source, _, context, _ in
                        guard let cell = source as? Cell, let context = context as? Context else { return nil }
                        return try await NowGraphQLSchema.reference(cell, target: target, context: context)
                    },
                    "referenceTableName": GraphQLField(type: GraphQLString) { _, _, _, _ in target },
                ])
                referenceWrappers[target] = type
                return type
            }
            let kind: String
            let valueType: GraphQLOutputType
            var extra: GraphQLFieldMap = [:]
            switch field.type {
            case .integer: (kind, valueType) = ("Long", long)
            case .decimal: (kind, valueType) = ("Float", GraphQLFloat)
            case .boolean: (kind, valueType) = ("Boolean", glideBoolean)
            case .sysID: (kind, valueType) = ("ID", GraphQLID)
            default: (kind, valueType) = ("String", GraphQLString)
            }
            let isChoice = catalog.choices(for: field.name, in: table) != nil
            var name = "GlideRecord_\(kind)Type"
            if isChoice {
                // Choice wrappers declare a String value, whatever the column holds (state comes back as "2").
                name = "GlideRecord_ChoiceType_Value"
                extra["value"] = GraphQLField(type: GraphQLString) { source, _, _, _ in (source as? Cell)?.value }
                extra["_choices"] = GraphQLField(type: GraphQLList(choiceType)) { [catalog] source, _, _, _ in
                    guard let cell = source as? Cell, let table = catalog.table(cell.record.table) else { return nil }
                    // The empty "None" option first, as the instance lists it.
                    return [Choice(value: "", label: "-- None --")]
                        + (catalog.choices(for: cell.column.field.name, in: table) ?? []).map {
                            Choice(value: $0.value, label: $0.label)
                        }
                }
            }
            if let existing = wrappers[name] { return existing }
            let type = try wrapperType(name: name, value: valueType, extra: extra)
            wrappers[name] = type
            return type
        }

        func wrapperType(name: String, value: GraphQLOutputType, extra: GraphQLFieldMap) throws -> GraphQLObjectType {
            var fields: GraphQLFieldMap = [
                "value": GraphQLField(type: value) { source, _, _, _ in
                    guard let cell = source as? Cell else { return nil }
                    return NowGraphQLSchema.typedValue(cell)
                },
                "displayValue": GraphQLField(type: GraphQLString) { source, _, _, _ in
                    guard let cell = source as? Cell else { return nil }
                    return cell.renderer.displayValue(of: cell.column, in: cell.record)
                },
                "label": GraphQLField(type: GraphQLString) { source, _, _, _ in (source as? Cell)?.column.field.label },
                "internalType": GraphQLField(type: GraphQLString) { source, _, _, _ in
                    (source as? Cell)?.column.field.type.rawValue
                },
                "hasValue": GraphQLField(type: GraphQLBoolean) { source, _, _, _ in (source as? Cell).map { !$0.value.isEmpty } },
                "isNil": GraphQLField(type: GraphQLBoolean) { source, _, _, _ in (source as? Cell).map { $0.value.isEmpty } },
                "isMandatory": GraphQLField(type: GraphQLBoolean) { source, _, _, _ in (source as? Cell)?.column.field.mandatory },
            ]
            for (key, field) in extra { fields[key] = field }
            return try GraphQLObjectType(name: name, fields: fields)
        }
    }

    /// A leaf of a column wrapper as JSON, exactly as the library encodes what the wrapper's resolvers return
    /// (for ``NowGraphQLDirect``; decimals excepted, whose number formatting is the library's).
    static func leaf(_ name: String, of cell: Cell, isChoice: Bool) -> JSONValue {
        switch name {
        case "value":
            if isChoice { return .string(cell.value) }
            switch typedValue(cell) {
            case let number as Int: return .integer(number)
            case let flag as Bool: return .bool(flag)
            case let text as String: return .string(text)
            default: return .null
            }
        case "displayValue": return .string(cell.renderer.displayValue(of: cell.column, in: cell.record))
        case "label": return .string(cell.column.field.label)
        case "internalType": return .string(cell.column.field.type.rawValue)
        case "hasValue": return .bool(!cell.value.isEmpty)
        case "isNil": return .bool(cell.value.isEmpty)
        case "isMandatory": return .bool(cell.column.field.mandatory)
        default: return .null
        }
    }

    /// A column's value in its declared scalar: numbers and booleans as such, everything else a string; null
    /// when empty (strings stay "").
    static func typedValue(_ cell: Cell) -> (any Sendable)? {
        let value = cell.value
        switch cell.column.field.type {
        case .integer: return value.isEmpty ? nil : Int(value)
        case .decimal: return value.isEmpty ? nil : Double(value)
        case .boolean: return value.isEmpty ? nil : value == "true"
        case .journal: return ""
        default: return value
        }
    }

    /// What `delete_<table>` answers.
    struct Deleted: Sendable {
        let count: Int
        let sysID: String
    }

    /// Runs `insert_<table>` or `update_<table>`: the arguments given (not null) are the values written; answers the
    /// record as the caller now reads it.
    static func write(
        _ operation: ChangeEvent.Operation, table: String, sysID: String?, args: Map, context: any Sendable
    ) async throws -> Results {
        guard let context = context as? Context else { throw GraphQLError(message: "No context") }
        var values: [String: String] = [:]
        for (name, value) in args.dictionary ?? [:] where name != "sys_id" {
            switch value {
            case .string(let text): values[name] = text
            case .null, .undefined: continue
            default: values[name] = (try? value.stringValue(converting: true)) ?? ""
            }
        }
        let store = context.store
        let target = try engine { try store.table(table) }
        let caller = context.caller
        // The answer is the row as this write committed it, read in its transaction.
        let committed = CommittedRow()
        let read: @Sendable (SQLExecutor, String) async throws -> Void = { db, id in
            committed.set(try await store.readBack(id, in: target, fields: nil, caller: caller, db: db))
        }
        let id: String = try await engine {
            if operation == .insert {
                return try await store.insert(into: table, values: values, caller: caller, within: read)
            }
            return try await store.update(sysID ?? "", in: table, values: values, caller: caller, within: read)
        }
        guard let (columns, record) = committed.value else {
            // Nothing changed (or the caller may not read the row): what the caller reads now.
            var arguments: OrderedDictionary<String, Map> = ["sys_id": .string(id)]
            arguments["pagination"] = .dictionary(["limit": .int(1), "offset": .int(0)])
            return try await query(table, args: .dictionary(arguments), context: context)
        }
        let page = RecordPage(columns: columns, records: [record], total: 1)
        let data = try await engine { try await store.displayData(for: page, displayValues: true, caller: caller) }
        let renderer = RecordRenderer(
            catalog: store.catalog, mode: .all, excludeReferenceLink: true, baseURL: "", data: data, timeZone: caller.timeZone
        )
        return Results(table: target, page: page, renderer: renderer)
    }

    /// Runs one table field of `GlideRecord_Query`.
    /// `fields` narrows what is read to the selected columns (nil: every column).
    static func query(_ tableName: String, args: Map, context: any Sendable, fields: [String]? = nil) async throws -> Results {
        guard let context = context as? Context else { throw GraphQLError(message: "No context") }
        let store = context.store
        let table = try engine { try store.table(tableName) }
        var query = EncodedQuery()
        if let text = args["queryConditions"].string, !text.isEmpty {
            do {
                query = try EncodedQuery(text)
            } catch {
                throw GraphQLError(message: "Invalid queryConditions: \(error.message)")
            }
        }
        if let sysID = args["sys_id"].string { query = query.and("sys_id", .equals, sysID) }
        let pagination = args["pagination"]
        let limit = pagination["limit"].int ?? min(defaultLimit, context.maxPageSize)
        let offset = pagination["offset"].int ?? 0
        guard (0...context.maxPageSize).contains(limit) else {
            throw GraphQLError(message: "pagination.limit must be from 0 to \(context.maxPageSize)")
        }
        guard offset >= 0 else { throw GraphQLError(message: "pagination.offset must not be negative") }
        let count = args["omitCount"].bool != true
        let page = try await engine {
            try await store.list(
                RecordQuery(table: table.name, query: query, fields: fields, limit: limit, offset: offset, count: count),
                caller: context.caller
            )
        }
        let data = try await engine { try await store.displayData(for: page, displayValues: true, caller: context.caller) }
        let renderer = RecordRenderer(
            catalog: store.catalog, mode: .all, excludeReferenceLink: true, baseURL: "", data: data,
            timeZone: context.caller.timeZone
        )
        return Results(table: table, page: page, renderer: renderer)
    }

    /// The record a reference points to, when the caller may read it.
    static func reference(_ cell: Cell, target: String, context: Context) async throws -> Row? {
        let id = cell.value
        guard !id.isEmpty else { return nil }
        let store = context.store
        let record: Record
        let columns: [ResultColumn]
        do {
            (columns, record) = try await store.get(id, in: target, caller: context.caller)
        } catch let error as EngineError where error.code == .notFound {
            return nil
        }
        let page = RecordPage(columns: columns, records: [record], total: 1)
        let data = try await engine { try await store.displayData(for: page, displayValues: true, caller: context.caller) }
        let renderer = RecordRenderer(
            catalog: store.catalog, mode: .all, excludeReferenceLink: true, baseURL: "", data: data,
            timeZone: context.caller.timeZone
        )
        return Row(record: record, columns: Dictionary(columns.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first }), renderer: renderer)
    }

    /// Runs engine work, wording its refusals as GraphQL errors.
    static func engine<T>(_ work: () async throws -> T) async throws -> T {
        do {
            return try await work()
        } catch let error as EngineError {
            let wording = ServiceNowError(error)
            throw GraphQLError(message: wording.detail.map { "\(wording.message): \($0)" } ?? wording.message)
        }
    }

    static func engine<T>(_ work: () throws -> T) throws -> T {
        do {
            return try work()
        } catch let error as EngineError {
            let wording = ServiceNowError(error)
            throw GraphQLError(message: wording.detail.map { "\(wording.message): \($0)" } ?? wording.message)
        }
    }
}
