import Foundation

/// Prints an ``EncodedQuery`` as canonical encoded-query text.
enum EncodedQueryPrinter {
    static func print(_ query: EncodedQuery) -> String {
        var parts: [String] = []
        for (index, group) in query.groups.enumerated() {
            var groupText = group.clauses.map { $0.alternatives.map(print).joined(separator: "^OR") }
                .joined(separator: "^")
            if index > 0 { groupText = "NQ" + groupText }
            parts.append(groupText)
        }
        for term in query.orderBy {
            parts.append((term.descending ? "ORDERBYDESC" : "ORDERBY") + term.field)
        }
        return parts.joined(separator: "^")
    }

    static func print(_ condition: QueryCondition) -> String {
        condition.field + condition.op.rawValue + condition.value.replacingOccurrences(of: "^", with: "^^")
    }
}
