/// Parses encoded query text into an ``EncodedQuery``.
enum EncodedQueryParser {
    static let maximumLength = 32_768

    static func parse(_ text: String) throws(EncodedQueryError) -> EncodedQuery {
        guard text.utf8.count <= maximumLength else {
            throw EncodedQueryError("The query is longer than \(maximumLength) characters")
        }
        var query = EncodedQuery()
        var group = QueryGroup(clauses: [])
        // A JOIN term takes the conditions that follow it, up to the next group, sort term or subquery.
        var join: Subquery? = nil
        var joinClauses: [QueryClause] = []
        func closeJoin() {
            guard var open = join else { return }
            open.query = EncodedQuery(groups: joinClauses.isEmpty ? [] : [QueryGroup(clauses: joinClauses)])
            group.subqueries.append(open)
            join = nil
            joinClauses = []
        }
        func closeGroup() {
            closeJoin()
            if !group.clauses.isEmpty || !group.subqueries.isEmpty { query.groups.append(group) }
            group = QueryGroup(clauses: [])
        }
        let tokens = splitTerms(text)
        var index = 0
        while index < tokens.count {
            let rawToken = tokens[index]
            let position = index
            index += 1
            var token = Substring(rawToken)
            if token.isEmpty || token == "EQ" { continue }
            if token.hasPrefix("ORDERBYDESC") {
                closeJoin()
                let field = token.dropFirst("ORDERBYDESC".count)
                try requireFieldName(field, in: rawToken)
                query.orderBy.append(OrderTerm(String(field), descending: true))
                continue
            }
            if token.hasPrefix("ORDERBY") {
                closeJoin()
                let field = token.dropFirst("ORDERBY".count)
                try requireFieldName(field, in: rawToken)
                query.orderBy.append(OrderTerm(String(field)))
                continue
            }
            if token.hasPrefix("GROUPBY") { continue }
            if position > 0, token.hasPrefix("NQ") {
                closeGroup()
                token = token.dropFirst(2)
                if token.isEmpty { continue }
            }
            if token.hasPrefix("JOIN") {
                closeJoin()
                let (subquery, first) = try parseJoinHead(token.dropFirst(4), in: rawToken)
                join = subquery
                if !first.isEmpty { joinClauses.append(QueryClause([try parseCondition(first)])) }
                continue
            }
            if token.hasPrefix("RLQUERY") {
                closeJoin()
                guard let end = tokens[index...].firstIndex(of: "ENDRLQUERY") else {
                    throw EncodedQueryError("Malformed query term '\(rawToken)': RLQUERY without ^ENDRLQUERY")
                }
                var subquery = try parseRelatedListHead(token.dropFirst(7), in: rawToken)
                let clauses = try parseSubqueryConditions(tokens[index..<end])
                subquery.query = EncodedQuery(groups: clauses.isEmpty ? [] : [QueryGroup(clauses: clauses)])
                group.subqueries.append(subquery)
                index = end + 1
                continue
            }
            if token == "ENDRLQUERY" { throw EncodedQueryError("Malformed query: ENDRLQUERY without RLQUERY") }
            if position > 0, token.hasPrefix("OR") {
                if join != nil, !joinClauses.isEmpty {
                    joinClauses[joinClauses.count - 1].alternatives.append(try parseCondition(token.dropFirst(2)))
                    continue
                }
                if join == nil, !group.clauses.isEmpty {
                    group.clauses[group.clauses.count - 1].alternatives.append(try parseCondition(token.dropFirst(2)))
                    continue
                }
            }
            let clause = QueryClause([try parseCondition(token)])
            if join != nil { joinClauses.append(clause) } else { group.clauses.append(clause) }
        }
        closeGroup()
        return query
    }

    /// `<table>.<field>=<other>.<otherField>!<first condition>` (after `JOIN`).
    private static func parseJoinHead(_ text: Substring, in term: String) throws(EncodedQueryError) -> (Subquery, Substring) {
        let bang = text.firstIndex(of: "!") ?? text.endIndex
        let head = text[..<bang]
        let first = bang < text.endIndex ? text[text.index(after: bang)...] : ""
        let sides = head.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard sides.count == 2, let left = splitQualified(sides[0]), let right = splitQualified(sides[1]) else {
            throw EncodedQueryError("Malformed query term '\(term)': a join reads JOIN<table>.<field>=<table>.<field>!<condition>")
        }
        return (Subquery(.join(table: left.table, field: left.field, otherField: right.field), table: right.table), first)
    }

    /// `<other>.<field>,<comparison><count>[,m2m]` (after `RLQUERY`).
    private static func parseRelatedListHead(_ text: Substring, in term: String) throws(EncodedQueryError) -> Subquery {
        let malformed = EncodedQueryError(
            "Malformed query term '\(term)': a related-list query reads RLQUERY<table>.<field>,<comparison><count>[,m2m]"
        )
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 2 || (parts.count == 3 && parts[2] == "m2m"), let target = splitQualified(parts[0]) else {
            throw malformed
        }
        let comparisons: [(String, QueryOperator)] = [
            (">=", .greaterOrEqual), ("<=", .lessOrEqual), ("!=", .notEquals), (">", .greaterThan), ("<", .lessThan),
            ("=", .equals),
        ]
        guard let (spelling, comparison) = comparisons.first(where: { parts[1].hasPrefix($0.0) }),
            let count = Int(parts[1].dropFirst(spelling.count)), count >= 0
        else { throw malformed }
        return Subquery(
            .relatedList(field: target.field, comparison: comparison, count: count, manyToMany: parts.count == 3),
            table: target.table
        )
    }

    /// `table.field`, both plain names.
    private static func splitQualified(_ text: Substring) -> (table: String, field: String)? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy(isPlainName) else { return nil }
        return (String(parts[0]), String(parts[1]))
    }

    private static func isPlainName(_ name: Substring) -> Bool {
        guard let first = name.first, first.isLetter else { return false }
        return name.allSatisfy { isFieldCharacter($0) && $0 != "." }
    }

    /// The conditions inside `RLQUERY…^ENDRLQUERY`: ANDed terms with `^OR` alternatives.
    private static func parseSubqueryConditions(_ tokens: ArraySlice<String>) throws(EncodedQueryError) -> [QueryClause] {
        var clauses: [QueryClause] = []
        for rawToken in tokens {
            let token = Substring(rawToken)
            if token.isEmpty || token == "EQ" { continue }
            if token.hasPrefix("NQ") || token.hasPrefix("JOIN") || token.hasPrefix("RLQUERY") || token.hasPrefix("ORDERBY") {
                throw EncodedQueryError("Malformed query term '\(rawToken)': not allowed inside RLQUERY…^ENDRLQUERY")
            }
            if token.hasPrefix("OR"), !clauses.isEmpty {
                clauses[clauses.count - 1].alternatives.append(try parseCondition(token.dropFirst(2)))
            } else {
                clauses.append(QueryClause([try parseCondition(token)]))
            }
        }
        return clauses
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
        let fieldEnd = fieldEnd(in: term)
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

    /// Where the field name of a term ends. Field names may hold capitals (an instance ignores unknown ones,
    /// `AAAA=BBBB`, like any other unknown field), so a name ends at the first character that cannot be part of
    /// one or where an operator spelled in capitals begins (`stateIN1,2`).
    private static func fieldEnd(in term: Substring) -> Substring.Index {
        var index = term.startIndex
        while index < term.endIndex {
            let char = term[index]
            guard isFieldCharacter(char) else { return index }
            if index > term.startIndex, char.isUppercase,
                upperCaseSpellings.contains(where: { term[index...].hasPrefix($0) })
            {
                return index
            }
            index = term.index(after: index)
        }
        return index
    }

    private static let upperCaseSpellings = QueryOperator.spellings.map(\.0).filter { $0.first?.isUppercase == true }

    private static func isFieldCharacter(_ char: Character) -> Bool {
        guard let ascii = char.asciiValue else { return false }
        return (ascii >= 0x61 && ascii <= 0x7a) || (ascii >= 0x41 && ascii <= 0x5a) || (ascii >= 0x30 && ascii <= 0x39)
            || ascii == 0x5f || ascii == 0x2e
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
