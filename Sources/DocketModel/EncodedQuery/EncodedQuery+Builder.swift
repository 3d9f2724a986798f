extension EncodedQuery {
    /// Starts a query with one condition, so that callers never join terms with `^` by hand.
    ///
    /// ```swift
    /// let query = EncodedQuery.where("active", .equals, "true")
    ///     .and("priority", .lessOrEqual, "2")
    ///     .or("assigned_to", .equals, "javascript:gs.getUserID()")
    ///     .orderBy("sys_created_on", descending: true)
    /// query.description // "active=true^priority<=2^ORassigned_to=javascript:gs.getUserID()^ORDERBYDESCsys_created_on"
    /// ```
    public static func `where`(_ field: String, _ op: QueryOperator, _ value: String = "") -> EncodedQuery {
        EncodedQuery(groups: [QueryGroup(clauses: [QueryClause([QueryCondition(field, op, value)])])])
    }

    /// Adds a condition that must also hold (`^`).
    public func and(_ field: String, _ op: QueryOperator, _ value: String = "") -> EncodedQuery {
        var query = self
        let condition = QueryClause([QueryCondition(field, op, value)])
        if query.groups.isEmpty {
            query.groups = [QueryGroup(clauses: [condition])]
        } else {
            query.groups[query.groups.count - 1].clauses.append(condition)
        }
        return query
    }

    /// Adds an alternative to the last condition (`^OR`).
    public func or(_ field: String, _ op: QueryOperator, _ value: String = "") -> EncodedQuery {
        var query = self
        guard let group = query.groups.indices.last, let clause = query.groups[group].clauses.indices.last else {
            return and(field, op, value)
        }
        query.groups[group].clauses[clause].alternatives.append(QueryCondition(field, op, value))
        return query
    }

    /// Starts a new alternative group (`^NQ`) with one condition.
    public func orWhere(_ field: String, _ op: QueryOperator, _ value: String = "") -> EncodedQuery {
        var query = self
        query.groups.append(QueryGroup(clauses: [QueryClause([QueryCondition(field, op, value)])]))
        return query
    }

    /// Adds a sort term.
    public func orderBy(_ field: String, descending: Bool = false) -> EncodedQuery {
        var query = self
        query.orderBy.append(OrderTerm(field, descending: descending))
        return query
    }
}
