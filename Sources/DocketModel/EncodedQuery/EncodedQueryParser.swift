/// Parses encoded query text into an ``EncodedQuery``.
enum EncodedQueryParser {
    static let maximumLength = 32_768

    static func parse(_ text: String) throws(EncodedQueryError) -> EncodedQuery {
        guard text.utf8.count <= maximumLength else {
            throw EncodedQueryError("The query is longer than \(maximumLength) characters")
        }
        var query = EncodedQuery()
        var group: [QueryClause] = []
        for (index, rawToken) in splitTerms(text).enumerated() {
            var token = Substring(rawToken)
            if token.isEmpty || token == "EQ" { continue }
            if token.hasPrefix("ORDERBYDESC") {
                let field = token.dropFirst("ORDERBYDESC".count)
                try requireFieldName(field, in: rawToken)
                query.orderBy.append(OrderTerm(String(field), descending: true))
                continue
            }
            if token.hasPrefix("ORDERBY") {
                let field = token.dropFirst("ORDERBY".count)
                try requireFieldName(field, in: rawToken)
                query.orderBy.append(OrderTerm(String(field)))
                continue
            }
            if token.hasPrefix("GROUPBY") { continue }
            if index > 0, token.hasPrefix("NQ") {
                if !group.isEmpty { query.groups.append(QueryGroup(clauses: group)) }
                group = []
                token = token.dropFirst(2)
                if token.isEmpty { continue }
            }
            if index > 0, token.hasPrefix("OR"), !group.isEmpty {
                let condition = try parseCondition(token.dropFirst(2))
                group[group.count - 1].alternatives.append(condition)
                continue
            }
            group.append(QueryClause([try parseCondition(token)]))
        }
        if !group.isEmpty { query.groups.append(QueryGroup(clauses: group)) }
        return query
    }

    /// Splits at single `^`; `^^` stands for a literal caret inside a value.
    static func splitTerms(_ text: String) -> [String] {
        var terms: [String] = []
        var current = ""
        var iterator = text.makeIterator()
        var pending: Character? = nil
        while let char = pending ?? iterator.next() {
            pending = nil
            if char == "^" {
                if let next = iterator.next() {
                    if next == "^" {
                        current.append("^")
                        continue
                    }
                    pending = next
                }
                terms.append(current)
                current = ""
            } else {
                current.append(char)
            }
        }
        terms.append(current)
        return terms
    }

    private static func parseCondition(_ term: Substring) throws(EncodedQueryError) -> QueryCondition {
        let fieldEnd = term.firstIndex { !isFieldCharacter($0) } ?? term.endIndex
        let field = term[..<fieldEnd]
        let rest = term[fieldEnd...]
        guard !field.isEmpty else { throw EncodedQueryError("Malformed query term '\(term)': no field name") }
        try requireFieldName(field, in: String(term))
        guard let (spelling, op) = QueryOperator.spellings.first(where: { rest.hasPrefix($0.0) }) else {
            if rest.isEmpty { throw EncodedQueryError("Malformed query term '\(term)': no operator") }
            throw EncodedQueryError("Malformed query term '\(term)': unknown operator")
        }
        let value = String(rest.dropFirst(spelling.count))
        if op.isUnary && !value.isEmpty {
            throw EncodedQueryError("Malformed query term '\(term)': \(op.rawValue) takes no value")
        }
        return QueryCondition(String(field), op, value)
    }

    private static func isFieldCharacter(_ char: Character) -> Bool {
        guard let ascii = char.asciiValue else { return false }
        return (ascii >= 0x61 && ascii <= 0x7a) || (ascii >= 0x30 && ascii <= 0x39) || ascii == 0x5f || ascii == 0x2e
    }

    private static func requireFieldName(_ field: Substring, in term: String) throws(EncodedQueryError) {
        let parts = field.split(separator: ".", omittingEmptySubsequences: false)
        let valid = !field.isEmpty && parts.count <= 6
            && parts.allSatisfy { part in
                guard let first = part.first, first.isLetter else { return false }
                return part.allSatisfy(isFieldCharacter) && !part.contains(".")
            }
        if !valid { throw EncodedQueryError("Malformed query term '\(term)': invalid field name '\(field)'") }
    }
}
