import DocketModel

/// The `sysparm_*` parameters of a Table API request, validated.
struct TableParameters {
    var all: [(String, String)]
    var query = EncodedQuery()
    var fields: [String]?
    var limit: Int
    var offset = 0
    var displayMode = DisplayMode.value
    var excludeReferenceLink = false
    var noCount = false
    var suppressPaginationHeader = false
    var inputDisplayValue = false
    var suppressAutoSysField = false

    init(query rawQuery: String?, table: SchemaCatalog.Table, catalog: SchemaCatalog, maxPageSize: Int) throws {
        all = FormQuery.parse(rawQuery)
        limit = maxPageSize
        var filters: [QueryClause] = []
        for (name, value) in all {
            switch name {
            case "sysparm_query":
                do {
                    query = query.and(try EncodedQuery(value))
                } catch {
                    throw ServiceNowError.badRequest("Invalid encoded query", detail: error.message)
                }
            case "sysparm_fields":
                let names = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                // An empty list (pysnow sends `sysparm_fields=`) means every field, as on ServiceNow.
                let listed = names.filter { !$0.isEmpty }
                fields = listed.isEmpty ? nil : listed
            case "sysparm_limit":
                guard let number = Int(value.trimmingCharacters(in: .whitespaces)), number >= 0 else {
                    throw ServiceNowError.badRequest(
                        "Invalid sysparm_limit", detail: "sysparm_limit must be a whole number from 0 to \(maxPageSize)"
                    )
                }
                guard number <= maxPageSize else {
                    throw ServiceNowError.badRequest(
                        "Invalid sysparm_limit", detail: "sysparm_limit \(number) exceeds the maximum page size \(maxPageSize)"
                    )
                }
                limit = number
            case "sysparm_offset":
                guard let number = Int(value.trimmingCharacters(in: .whitespaces)) else {
                    throw ServiceNowError.badRequest("Invalid sysparm_offset", detail: "sysparm_offset must be a whole number")
                }
                guard number >= 0 else {
                    throw ServiceNowError.badRequest("offset is \(number)", detail: "Negative offset is not supported")
                }
                offset = number
            case "sysparm_display_value": displayMode = DisplayMode(parameter: value)
            case "sysparm_exclude_reference_link": excludeReferenceLink = Self.flag(value)
            case "sysparm_no_count": noCount = Self.flag(value)
            case "sysparm_suppress_pagination_header": suppressPaginationHeader = Self.flag(value)
            case "sysparm_input_display_value": inputDisplayValue = Self.flag(value)
            case "sysparm_suppress_auto_sys_field": suppressAutoSysField = Self.flag(value)
            default:
                if name.hasPrefix("sysparm_") { continue }
                if let clause = Self.filter(name, value, table: table, catalog: catalog) { filters.append(clause) }
            }
        }
        if !filters.isEmpty {
            query = query.and(EncodedQuery(groups: [QueryGroup(clauses: filters)]))
        }
    }

    static func flag(_ value: String) -> Bool { value.lowercased() == "true" }

    /// A name-value filter (`?user_name=john.doe`). Choice and reference fields also accept display values,
    /// as the Table API documents (`state=Closed`, `assigned_to=Beth Anglin`).
    static func filter(_ name: String, _ value: String, table: SchemaCatalog.Table, catalog: SchemaCatalog)
        -> QueryClause?
    {
        guard let field = table.field(name) else {
            // Unknown names are ignored, like unknown terms of an encoded query.
            return nil
        }
        var alternatives = [QueryCondition(name, .equals, value)]
        if let stored = catalog.choiceValue(forLabel: value, field: name, in: table), stored != value {
            alternatives.append(QueryCondition(name, .equals, stored))
        }
        if field.type == .reference, let target = field.reference.flatMap(catalog.table) {
            if let display = target.displayField { alternatives.append(QueryCondition("\(name).\(display)", .equals, value)) }
            if target.field("user_name") != nil { alternatives.append(QueryCondition("\(name).user_name", .equals, value)) }
        }
        return QueryClause(alternatives)
    }
}
