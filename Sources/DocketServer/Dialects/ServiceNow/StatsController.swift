import DocketModel
import Foundation
import Hummingbird

/// The Aggregate API: `GET /api/now[/v1]/stats/{table}`. Every number in the answer is a string.
struct StatsController {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let configuration: Configuration

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get(":table", use: stats)
        return routes
    }

    @Sendable func stats(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let catalog = store.catalog
        let name = try context.parameters.require("table")
        guard let table = catalog.table(name) else { throw EngineError.invalidTable(name) }
        let parameters = try TableParameters(
            query: request.uri.query, table: table, catalog: catalog, maxPageSize: configuration.maxPageSize
        )
        var aggregate = AggregateRequest(table: table.name, query: parameters.query)
        for (key, value) in parameters.all {
            switch key {
            case "sysparm_count": aggregate.count = TableParameters.flag(value)
            case "sysparm_avg_fields": aggregate.fields += Self.list(value).map { (.avg, $0) }
            case "sysparm_min_fields": aggregate.fields += Self.list(value).map { (.min, $0) }
            case "sysparm_max_fields": aggregate.fields += Self.list(value).map { (.max, $0) }
            case "sysparm_sum_fields": aggregate.fields += Self.list(value).map { (.sum, $0) }
            case "sysparm_group_by": aggregate.groupBy += Self.list(value)
            case "sysparm_having": aggregate.having += try Self.list(value).map(Self.having)
            case "sysparm_order_by": aggregate.orderBy += Self.list(value).map(Self.order)
            default: continue
            }
        }
        // At most a page's worth of groups (--max-page-size): grouping by a value each record has alone would
        // otherwise answer with as many groups as the table has records.
        if !aggregate.groupBy.isEmpty { aggregate.limit = configuration.maxPageSize + 1 }
        let groups = try await store.aggregate(aggregate, caller: caller)
        if !aggregate.groupBy.isEmpty, groups.count > configuration.maxPageSize {
            throw EngineError.badRequest(
                "Too many groups",
                detail: "More than \(configuration.maxPageSize) groups; narrow sysparm_query, or group by fewer or other fields"
            )
        }
        var labels: [[String: String]] = Array(repeating: [:], count: aggregate.groupBy.count)
        if parameters.displayMode != .value, !aggregate.groupBy.isEmpty {
            labels = try await displayLabels(groups, groupBy: aggregate.groupBy, table: table, caller: caller)
        }
        func statsObject(_ group: AggregateGroup) -> JSONValue {
            var members: [(String, JSONValue)] = []
            if let count = group.count { members.append(("count", .string(String(count)))) }
            for function in AggregateFunction.allCases where function != .count {
                let entries = group.results.filter { $0.function == function }
                guard !entries.isEmpty else { continue }
                members.append((function.key, JSONValue(members: entries.map { ($0.field, .string($0.value)) })))
            }
            return JSONValue(members: members)
        }
        let result: JSONValue
        if aggregate.groupBy.isEmpty {
            result = .object(["stats": groups.first.map(statsObject) ?? .object([:])])
        } else {
            result = .array(groups.map { group in
                let fields = zip(aggregate.groupBy, group.values).enumerated().map { index, pair -> JSONValue in
                    var members: [(String, JSONValue)] = [("field", .string(pair.0)), ("value", .string(pair.1))]
                    if parameters.displayMode != .value {
                        members.append(("display_value", .string(labels[index][pair.1] ?? pair.1)))
                    }
                    return JSONValue(members: members)
                }
                return .object(["stats": statsObject(group), "groupby_fields": .array(fields)])
            })
        }
        return Response.json(.object(["result": result]))
    }

    /// Display values of grouped values: choice labels, referenced records' display values.
    private func displayLabels(
        _ groups: [AggregateGroup], groupBy: [String], table: SchemaCatalog.Table, caller: Caller
    ) async throws
        -> [[String: String]]
    {
        let catalog = store.catalog
        var labels: [[String: String]] = []
        for (index, name) in groupBy.enumerated() {
            var map: [String: String] = [:]
            let values = Set(groups.map { $0.values[index] }).subtracting([""])
            if let field = catalog.hierarchyField(name, in: table) ?? table.field(name) {
                if field.type == .reference, let target = field.reference {
                    map = try await store.displayValues([target: values], caller: caller)[target] ?? [:]
                } else if field.type == .boolean {
                    for value in values { map[value] = value }
                } else {
                    for value in values { map[value] = catalog.choiceLabel(value, field: name, in: table) ?? value }
                }
            }
            labels.append(map)
        }
        return labels
    }

    private static func list(_ value: String) -> [String] {
        value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `count^priority^>^3` or `avg^reassignment_count^>=^1.5`.
    private static func having(_ text: String) throws -> AggregateRequest.Having {
        let parts = text.split(separator: "^", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, let function = AggregateFunction(rawValue: parts[0].uppercased()),
            let value = Double(parts[3])
        else {
            throw ServiceNowError.badRequest(
                "Invalid sysparm_having", detail: "Expected aggregate^field^operator^number, e.g. count^priority^>^3"
            )
        }
        return .init(function: function, field: parts[1], op: parts[2], value: value)
    }

    /// `priority`, `COUNT`, `AVG^reassignment_count`, each optionally followed by `^DESC`.
    private static func order(_ text: String) -> AggregateRequest.Order {
        var parts = text.split(separator: "^").map(String.init)
        var descending = false
        if parts.last?.uppercased() == "DESC" {
            descending = true
            parts.removeLast()
        }
        if let first = parts.first, let function = AggregateFunction(rawValue: first.uppercased()) {
            return .init(function: function, field: parts.count > 1 ? parts[1] : "", descending: descending)
        }
        return .init(function: nil, field: parts.first ?? "", descending: descending)
    }
}
