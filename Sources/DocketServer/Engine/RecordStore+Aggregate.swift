import DocketModel
import Foundation

/// Aggregates computed in SQL (the Aggregate API): counts, averages, minimums, maximums and sums, optionally
/// grouped, filtered after grouping (`HAVING`) and ordered, over the records the caller may read.
enum AggregateFunction: String, Sendable, CaseIterable {
    case count = "COUNT", avg = "AVG", min = "MIN", max = "MAX", sum = "SUM"

    /// The member name in the response (`avg`, `min`, …).
    var key: String { rawValue.lowercased() }
}

struct AggregateRequest: Sendable {
    struct Having: Sendable {
        var function: AggregateFunction
        var field: String
        var op: String
        var value: Double
    }

    struct Order: Sendable {
        /// nil: a group-by field; otherwise an aggregate of `field` (COUNT ignores it).
        var function: AggregateFunction?
        var field: String
        var descending: Bool
    }

    var table: String
    var query = EncodedQuery()
    var count = false
    /// Aggregated fields, by function (never `.count`).
    var fields: [(function: AggregateFunction, field: String)] = []
    var groupBy: [String] = []
    var having: [Having] = []
    var orderBy: [Order] = []
    /// At most this many groups (in `orderBy`'s order); nil for all of them.
    var limit: Int? = nil
}

struct AggregateGroup: Sendable {
    /// Group-by values, in stored form, in `groupBy` order.
    var values: [String]
    var count: Int?
    /// Aggregate results by function key then field, already formatted as ServiceNow prints them.
    var results: [(function: AggregateFunction, field: String, value: String)]
}

extension RecordStore {
    func aggregate(_ request: AggregateRequest, caller: Caller) async throws -> [AggregateGroup] {
        let table = try table(request.table)
        if !caller.isAdmin, policy.rules(for: .read, on: table, caller: caller).isEmpty {
            throw EngineError(.forbidden, "Insufficient rights to query records", detail: "No read access to \(table.name)")
        }
        return try await storage.read { db in
            var compiler = self.compiler(for: table, caller: caller, dialect: db.dialect)
            var expressions: [SQLFragment] = []
            var groupColumns: [SQLFragment] = []
            var groupFields: [FieldDefinition] = []
            for (index, name) in request.groupBy.enumerated() {
                guard let (column, field) = try compiler.resolve(name, scope: .table), field.type.isStored else {
                    throw EngineError.badRequest("Invalid sysparm_group_by", detail: "Unknown field \(name) in \(table.name)")
                }
                groupColumns.append(column)
                groupFields.append(field)
                expressions.append(column + " AS " + .identifier("g\(index)"))
            }
            expressions.append("COUNT(*) AS " + .identifier("n"))
            var aggregated: [(function: AggregateFunction, field: FieldDefinition)] = []
            func aggregateExpression(_ function: AggregateFunction, _ name: String) throws -> (SQLFragment, FieldDefinition)? {
                if function == .count { return ("COUNT(*)", FieldDefinition(table: "", name: "", label: "", type: .integer)) }
                guard let (column, field) = try compiler.resolve(name, scope: .table), field.type.isStored else {
                    throw EngineError.badRequest(
                        "Invalid sysparm_\(function.key)_fields", detail: "Unknown field \(name) in \(table.name)"
                    )
                }
                if function == .avg || function == .sum, ![.integer, .decimal].contains(field.type) {
                    throw EngineError.badRequest(
                        "Invalid sysparm_\(function.key)_fields", detail: "\(name) is not a numeric field"
                    )
                }
                return (SQLFragment(function.rawValue) + "(" + column + ")", field)
            }
            for (index, entry) in request.fields.enumerated() {
                guard let (expression, field) = try aggregateExpression(entry.function, entry.field) else { continue }
                expressions.append(expression + " AS " + .identifier("a\(index)"))
                aggregated.append((entry.function, field))
            }
            var conditions: [SQLFragment] = []
            if let filter = compiler.classFilter() { conditions.append(filter) }
            if let filter = try compiler.tracedAccessFilter(.read) { conditions.append(filter) }
            if let filter = try compiler.condition(for: request.query) { conditions.append(filter) }
            var having: [SQLFragment] = []
            for clause in request.having {
                guard let (expression, _) = try aggregateExpression(clause.function, clause.field),
                    ["=", "!=", ">", ">=", "<", "<="].contains(clause.op)
                else { throw EngineError.badRequest("Invalid sysparm_having", detail: "Unsupported operator \(clause.op)") }
                having.append(expression + " " + SQLFragment(clause.op == "!=" ? "<>" : clause.op) + " " + .bind(clause.value))
            }
            var order: [SQLFragment] = []
            for term in request.orderBy {
                let direction = SQLFragment(db.dialect.direction(descending: term.descending))
                if let function = term.function {
                    guard let (expression, _) = try aggregateExpression(function, term.field) else { continue }
                    order.append(expression + direction)
                } else if let index = request.groupBy.firstIndex(of: term.field) {
                    order.append(groupColumns[index] + direction)
                }
            }
            if order.isEmpty { order = groupColumns.map { $0 + SQLFragment(db.dialect.direction(descending: false)) } }
            var sql: SQLFragment = "SELECT " + expressions.joined(", ") + " FROM " + compiler.from
            if !conditions.isEmpty { sql = sql + " WHERE " + conditions.joined(" AND ") }
            if !groupColumns.isEmpty { sql = sql + " GROUP BY " + groupColumns.joined(", ") }
            if !having.isEmpty {
                // Without grouping HAVING still applies to the single group (all matching rows).
                sql = sql + " HAVING " + having.joined(" AND ")
            }
            if !order.isEmpty, !groupColumns.isEmpty { sql = sql + " ORDER BY " + order.joined(", ") }
            if let limit = request.limit { sql = sql + " LIMIT " + .bind(max(0, limit)) }
            let rows: [ResultRow]
            do {
                rows = try await db.rows(sql)
            } catch where db.dialect.isIntegerOverflow(error) {
                // Stored values are bounded by the column type, but their sum is not.
                throw EngineError.badRequest(
                    "Aggregate out of range", detail: "A sum exceeds the 64-bit integer range; narrow the query"
                )
            }
            return try rows.map { row in
                var values: [String] = []
                for (index, field) in groupFields.enumerated() {
                    values.append(Self.string(try row.value(at: "g\(index)", kind: field.columnKind), type: field.type))
                }
                var results: [(AggregateFunction, String, String)] = []
                for (index, entry) in aggregated.enumerated() {
                    let value = try row.value(at: "a\(index)", kind: entry.function == .avg ? .real : entry.field.columnKind)
                    results.append((entry.function, request.fields[index].field, Self.formatAggregate(value, entry.function, entry.field)))
                }
                return AggregateGroup(
                    values: values, count: request.count ? try row.value(at: "n", kind: .integer).intValue ?? 0 : nil,
                    results: results
                )
            }
        }
    }

    /// Averages with four decimals (as ServiceNow prints them); other results as the field's values are.
    private static func formatAggregate(_ value: SQLValue, _ function: AggregateFunction, _ field: FieldDefinition) -> String {
        if case .null = value { return "" }
        if function == .avg, let number = value.doubleValue { return String(format: "%.4f", number) }
        return string(value, type: field.type)
    }
}

extension SQLValue {
    var doubleValue: Double? {
        switch self {
        case .integer(let value): return Double(value)
        case .real(let value): return value
        case .text(let value): return Double(value)
        case .null: return nil
        }
    }
}
