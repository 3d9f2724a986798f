import DocketModel
import Foundation

/// A Compass query definition (§A.4.6): the record type, its columns with sorting, and a filter tree, compiled
/// to the engine's encoded query. Field paths are Compass names (`Owner`, `Owner.fullname`, `history.user_name`);
/// the macro `[CURRENT_USER]` is the caller's login.
struct CompassQueryDef: Sendable {
    struct Column: Sendable {
        var path: String
        var isShown: Bool
        var sortType: String
        var sortOrder: Int?
    }

    struct Filter: Sendable {
        var path: String
        var op: String
        var values: [String]
    }

    indirect enum Node: Sendable {
        case node(and: Bool, filters: [Filter], children: [Node])
    }

    var name: String
    var recordType: CompassRecordType
    var columns: [Column]
    var filter: Node

    static let operators = [
        "COMP_OP_EQ", "COMP_OP_NEQ", "COMP_OP_IN", "COMP_OP_NOT_IN", "COMP_OP_GT", "COMP_OP_GTE", "COMP_OP_LT", "COMP_OP_LTE",
        "COMP_OP_LIKE", "COMP_OP_NOT_LIKE", "COMP_OP_IS_NULL", "COMP_OP_IS_NOT_NULL", "COMP_OP_BETWEEN", "COMP_OP_NOT_BETWEEN",
    ]

    init(name: String, recordType: CompassRecordType, columns: [Column], filter: Node) {
        self.name = name
        self.recordType = recordType
        self.columns = columns
        self.filter = filter
    }

    /// Reads a QueryDef body; refuses unknown record types, fields and operators with a sentence.
    init(json: JSONValue) throws {
        guard let typeName = json["primaryEntityDefName"]?.stringValue, let type = CompassDirectory.recordType(typeName) else {
            throw CompassError(.badRequest, "primaryEntityDefName must name a record type: " + CompassDirectory.recordTypes.map(\.name).joined(separator: ", "))
        }
        recordType = type
        name = json["name"]?.stringValue ?? ""
        guard !name.isEmpty, name.count <= 254 else { throw CompassError(.badRequest, "A query needs a name of at most 254 characters") }
        guard let columns = json["queryFieldDefs"]?.arrayValue, !columns.isEmpty, columns.count <= 100 else {
            throw CompassError(.badRequest, "queryFieldDefs must list between 1 and 100 columns")
        }
        self.columns = try columns.map { column in
            guard let path = column["fieldPathName"]?.stringValue, Self.resolve(path, in: type) != nil else {
                throw CompassError(.badRequest, "\(type.name) has no field \(column["fieldPathName"]?.stringValue ?? "(none)")")
            }
            let sort = column["sortType"]?.stringValue ?? "NO_SORT"
            guard ["NO_SORT", "SORT_ASC", "SORT_DESC"].contains(sort) else {
                throw CompassError(.badRequest, "sortType must be NO_SORT, SORT_ASC or SORT_DESC")
            }
            let order = column["sortOrder"]?.intValue ?? column["sortOrder"]?.stringValue.flatMap { Int($0) }
            return Column(path: path, isShown: column["isShown"] != .bool(false), sortType: sort, sortOrder: order)
        }
        var budget = 200
        filter = try Self.node(json["filterNode"] ?? .object([:]), type: type, depth: 0, budget: &budget)
    }

    private static func node(_ json: JSONValue, type: CompassRecordType, depth: Int, budget: inout Int) throws -> Node {
        guard depth <= 8 else { throw CompassError(.badRequest, "The filter is nested too deeply") }
        let and = (json["boolOp"]?.stringValue ?? "BOOL_OP_AND") != "BOOL_OP_OR"
        var filters: [Filter] = []
        for item in json["fieldFilters"]?.arrayValue ?? [] {
            budget -= 1
            guard budget >= 0 else { throw CompassError(.badRequest, "The filter has too many conditions") }
            guard let path = item["fieldPath"]?.stringValue, resolve(path, in: type) != nil else {
                throw CompassError(.badRequest, "\(type.name) has no field \(item["fieldPath"]?.stringValue ?? "(none)") to filter on")
            }
            guard let op = item["compOp"]?.stringValue, operators.contains(op) else {
                throw CompassError(.badRequest, "compOp must be one of " + operators.joined(separator: ", "))
            }
            let values = (item["values"]?.arrayValue ?? []).compactMap { $0.stringValue ?? $0.intValue.map(String.init) }
            filters.append(Filter(path: path, op: op, values: values))
        }
        var children: [Node] = []
        for child in json["childFilterNodes"]?.arrayValue ?? [] {
            children.append(try node(child, type: type, depth: depth + 1, budget: &budget))
        }
        return .node(and: and, filters: filters, children: children)
    }

    /// The engine path of a Compass field path, and the Compass field it starts with; nil when unknown.
    static func resolve(_ path: String, in type: CompassRecordType) -> (engine: String, field: CompassRecordType.Field?)? {
        let parts = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard let first = parts.first, parts.count <= 3 else { return nil }
        if first.lowercased() == "history" {
            let map = ["action_name": "action_name", "action_timestamp": "action_timestamp", "user_name": "user_name",
                       "old_state": "old_state", "new_state": "new_state", "action_type": "action_type"]
            guard parts.count == 2, let field = map[parts[1].lowercased()] else { return nil }
            return ("history." + field, nil)
        }
        guard let field = type.field(first) else { return nil }
        switch field.source {
        case .value(let name), .choice(let name):
            return parts.count == 1 ? (name, field) : nil
        case .state: return parts.count == 1 ? ("state", field) : nil
        case .dbid: return parts.count == 1 ? ("number", field) : nil
        case .reference(let name, let display):
            if parts.count == 1 { return (name + "." + display, field) }
            let users = ["fullname": "name", "login_name": "user_name", "email": "email", "phone": "phone"]
            let projects = ["name": "name", "description": "description", "title": "name"]
            let map = display == "user_name" ? users : display == "name" ? projects : ["id": "number", "headline": "short_description"]
            guard parts.count == 2, let target = map[parts[1].lowercased()] else { return nil }
            return (name + "." + target, nil)
        default: return nil
        }
    }

    /// The engine query: the filter tree in disjunctive normal form (each AND-group a `^NQ` group), then the sorts.
    func encodedQuery(for caller: Caller, catalog: SchemaCatalog) throws -> EncodedQuery {
        let table = catalog.table(recordType.table)
        func condition(_ filter: Filter) throws -> QueryClause {
            if filter.op == "COMP_OP_NOT_BETWEEN" {
                guard filter.values.count == 2 else { throw CompassError(.badRequest, "COMP_OP_NOT_BETWEEN needs two values") }
                let below = try single(Filter(path: filter.path, op: "COMP_OP_LT", values: [filter.values[0]]))
                let above = try single(Filter(path: filter.path, op: "COMP_OP_GT", values: [filter.values[1]]))
                return QueryClause([below, above])
            }
            return QueryClause([try single(filter)])
        }
        func single(_ filter: Filter) throws -> QueryCondition {
            guard let (engine, field) = Self.resolve(filter.path, in: recordType) else {
                throw CompassError(.badRequest, "No field \(filter.path)")
            }
            var values = filter.values.map { $0 == "[CURRENT_USER]" ? caller.userName : $0 }
            // Labels become stored values (State, Severity …), display ids dbids become numbers.
            if let field, let table {
                switch field.source {
                case .choice(let name): values = values.map { catalog.choiceValue(forLabel: $0, field: name, in: table) ?? $0 }
                case .state: values = values.map { catalog.choiceValue(forLabel: $0, field: "state", in: table) ?? $0 }
                case .dbid:
                    // The dbid column is the display id stored as `number`: compare with the display id.
                    if let numbering = catalog.numbering(of: table) {
                        values = values.map {
                            recordType.number(ofDbid: $0, prefix: numbering.prefix, digits: numbering.digits) ?? $0
                        }
                    }
                default: break
                }
            }
            let first = values.first ?? ""
            switch filter.op {
            case "COMP_OP_EQ": return QueryCondition(engine, .equals, first)
            case "COMP_OP_NEQ": return QueryCondition(engine, .notEquals, first)
            case "COMP_OP_IN": return QueryCondition(engine, .in, values.joined(separator: ","))
            case "COMP_OP_NOT_IN": return QueryCondition(engine, .notIn, values.joined(separator: ","))
            case "COMP_OP_GT": return QueryCondition(engine, .greaterThan, first)
            case "COMP_OP_GTE": return QueryCondition(engine, .greaterOrEqual, first)
            case "COMP_OP_LT": return QueryCondition(engine, .lessThan, first)
            case "COMP_OP_LTE": return QueryCondition(engine, .lessOrEqual, first)
            case "COMP_OP_LIKE": return QueryCondition(engine, .like, first)
            case "COMP_OP_NOT_LIKE": return QueryCondition(engine, .notLike, first)
            case "COMP_OP_IS_NULL": return QueryCondition(engine, .isEmpty, "")
            case "COMP_OP_IS_NOT_NULL": return QueryCondition(engine, .isNotEmpty, "")
            case "COMP_OP_BETWEEN":
                guard values.count == 2 else { throw CompassError(.badRequest, "\(filter.op) needs two values") }
                return QueryCondition(engine, .between, values[0] + "@" + values[1])
            default: throw CompassError(.badRequest, "Unknown compOp \(filter.op)")
            }
        }
        // Each node as a list of AND-groups of conditions.
        func groups(_ node: Node) throws -> [[QueryClause]] {
            guard case .node(let and, let filters, let children) = node else { return [] }
            let parts: [[[QueryClause]]] = try filters.map { [[try condition($0)]] } + children.map { try groups($0) }
            if parts.isEmpty { return [[]] }
            if !and { return parts.flatMap { $0 } }
            var product: [[QueryClause]] = [[]]
            for part in parts {
                product = product.flatMap { left in part.map { left + $0 } }
                guard product.count <= 64 else { throw CompassError(.badRequest, "The filter has too many alternatives") }
            }
            return product
        }
        var query = EncodedQuery(groups: try groups(filter).map { QueryGroup(clauses: $0) })
        if query.groups.count == 1, query.groups[0].clauses.isEmpty { query.groups = [] }
        let sorts = columns.enumerated().filter { $0.element.sortType != "NO_SORT" }
            .sorted { ($0.element.sortOrder ?? $0.offset) < ($1.element.sortOrder ?? $1.offset) }
        for (_, column) in sorts {
            guard let (engine, _) = Self.resolve(column.path, in: recordType), !engine.hasPrefix("history.") else { continue }
            query.orderBy.append(OrderTerm(engine, descending: column.sortType == "SORT_DESC"))
        }
        return query
    }
}
