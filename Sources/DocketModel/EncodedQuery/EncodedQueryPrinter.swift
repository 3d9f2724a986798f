import Foundation

/// Prints an ``EncodedQuery`` as canonical encoded-query text.
enum EncodedQueryPrinter {
    static func print(_ query: EncodedQuery) -> String {
        var parts: [String] = []
        for (index, group) in query.groups.enumerated() {
            var terms = group.clauses.map { $0.alternatives.map(print).joined(separator: "^OR") }
            terms += group.subqueries.map(print)
            var groupText = terms.joined(separator: "^")
            if index > 0 { groupText = "NQ" + groupText }
            parts.append(groupText)
        }
        for term in query.orderBy {
            parts.append((term.descending ? "ORDERBYDESC" : "ORDERBY") + term.field)
        }
        return parts.joined(separator: "^")
    }

    static func print(_ subquery: Subquery) -> String {
        let conditions = print(EncodedQuery(groups: subquery.query.groups))
        switch subquery.kind {
        case .join(let table, let field, let otherField):
            return "JOIN\(table).\(field)=\(subquery.table).\(otherField)!" + conditions
        case .relatedList(let field, let comparison, let count, let manyToMany):
            let head = "RLQUERY\(subquery.table).\(field),\(comparison.rawValue)\(count)" + (manyToMany ? ",m2m" : "")
            return head + (conditions.isEmpty ? "" : "^" + conditions) + "^ENDRLQUERY"
        }
    }

    static func print(_ condition: QueryCondition) -> String {
        condition.field + condition.op.rawValue + condition.value.replacingOccurrences(of: "^", with: "^^")
    }
}
