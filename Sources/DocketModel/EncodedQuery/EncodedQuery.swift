/// A parsed encoded query: the filter language of ServiceNow's `sysparm_query`.
///
/// The structure mirrors the language's precedence: `^NQ` separates ``groups`` (ORed together), `^`
/// separates the ``QueryGroup/clauses`` of a group (ANDed), and `^OR` joins the alternatives of one clause.
/// Sorting is kept apart in ``orderBy``.
///
/// ```swift
/// let query = try EncodedQuery("active=true^priority<=2^ORpriority=5^ORDERBYDESCsys_updated_on")
/// query.description // prints the same canonical text back
/// ```
public struct EncodedQuery: Sendable, Equatable, CustomStringConvertible {
    /// Groups separated by `^NQ`; a record matches when any group matches. Empty means "everything".
    public var groups: [QueryGroup]
    /// Sort terms in order of precedence.
    public var orderBy: [OrderTerm]

    /// Creates a query from its parts.
    public init(groups: [QueryGroup] = [], orderBy: [OrderTerm] = []) {
        self.groups = groups
        self.orderBy = orderBy
    }

    /// Parses an encoded query string; throws ``EncodedQueryError`` when it is malformed.
    public init(_ text: String) throws(EncodedQueryError) {
        self = try EncodedQueryParser.parse(text)
    }

    /// A query with one clause per condition, all ANDed.
    public init(all conditions: [QueryCondition], orderBy: [OrderTerm] = []) {
        self.init(
            groups: conditions.isEmpty ? [] : [QueryGroup(clauses: conditions.map { QueryClause([$0]) })],
            orderBy: orderBy
        )
    }

    /// Whether the query filters nothing.
    public var isUnfiltered: Bool { groups.allSatisfy { $0.clauses.isEmpty && $0.subqueries.isEmpty } }

    /// Every condition in the query, in order.
    public var conditions: [QueryCondition] { groups.flatMap { $0.clauses.flatMap(\.alternatives) } }

    /// The canonical encoded-query text.
    public var description: String { EncodedQueryPrinter.print(self) }

    /// This query ANDed with another: every group of one combined with every group of the other.
    public func and(_ other: EncodedQuery) -> EncodedQuery {
        if other.isUnfiltered { return EncodedQuery(groups: groups, orderBy: orderBy + other.orderBy) }
        if isUnfiltered { return EncodedQuery(groups: other.groups, orderBy: orderBy + other.orderBy) }
        var combined: [QueryGroup] = []
        for left in groups {
            for right in other.groups {
                combined.append(QueryGroup(clauses: left.clauses + right.clauses, subqueries: left.subqueries + right.subqueries))
            }
        }
        return EncodedQuery(groups: combined, orderBy: orderBy + other.orderBy)
    }
}

/// An AND-group of clauses (the part of a query between `^NQ` separators).
public struct QueryGroup: Sendable, Equatable {
    /// The clauses, all of which must match.
    public var clauses: [QueryClause]
    /// Conditions on other tables (`JOIN…` and `RLQUERY…` terms), all of which must match too.
    public var subqueries: [Subquery]

    /// Creates a group.
    public init(clauses: [QueryClause], subqueries: [Subquery] = []) {
        self.clauses = clauses
        self.subqueries = subqueries
    }
}

/// A condition on records of another table that relate to the queried record.
///
/// - A join, `JOIN<table>.<field>=<other>.<otherField>!<conditions>`: there is a record of `other` whose
///   `otherField` equals this record's `field` and that matches the conditions
///   (`JOINsys_user.sys_id=sys_user_group.manager!active=true`: users who manage an active group).
///   The conditions run from `!` to the next `^NQ`, sort term, `JOIN` or `RLQUERY`.
/// - A related-list query, `RLQUERY<other>.<field>,<comparison><count>[,m2m]^<conditions>^ENDRLQUERY`: the
///   number of `other` records whose reference `field` points at this record and that match the conditions
///   compares with `count` (`RLQUERYincident.problem_id,>=1^ENDRLQUERY`: problems with an incident).
public struct Subquery: Sendable, Equatable {
    /// How the other table's records relate to the queried one.
    public enum Kind: Sendable, Equatable {
        /// `JOIN<table>.<field>=<other>.<otherField>`: `table` is the queried table as the term names it.
        case join(table: String, field: String, otherField: String)
        /// `RLQUERY<other>.<field>,<comparison><count>`; `manyToMany` is the `,m2m` flag (accepted; the
        /// conditions may dot-walk through the many-to-many record either way).
        case relatedList(field: String, comparison: QueryOperator, count: Int, manyToMany: Bool)
    }

    /// The relation.
    public var kind: Kind
    /// The other table.
    public var table: String
    /// Conditions on the other table's records (no subqueries of their own).
    public var query: EncodedQuery

    /// Creates a subquery.
    public init(_ kind: Kind, table: String, query: EncodedQuery = EncodedQuery()) {
        self.kind = kind
        self.table = table
        self.query = query
    }
}

/// Alternatives joined by `^OR`; the clause matches when any alternative matches.
public struct QueryClause: Sendable, Equatable {
    /// The alternatives; never empty in a parsed query.
    public var alternatives: [QueryCondition]

    /// Creates a clause.
    public init(_ alternatives: [QueryCondition]) { self.alternatives = alternatives }
}

/// One term: `<field><operator><value>`, such as `priority<=2` or `assigned_to.user_name=beth.anglin`.
public struct QueryCondition: Sendable, Equatable, CustomStringConvertible {
    /// The field name, possibly dot-walked through references (`caller_id.department.name`).
    public var field: String
    /// The operator.
    public var op: QueryOperator
    /// The value text as written (empty for unary operators); may be a `javascript:` dynamic value.
    public var value: String

    /// Creates a condition.
    public init(_ field: String, _ op: QueryOperator, _ value: String = "") {
        self.field = field
        self.op = op
        self.value = value
    }

    /// The field path split at dots.
    public var path: [Substring] { field.split(separator: ".", omittingEmptySubsequences: false) }

    /// The value recognised as a dynamic value, if it is one (`javascript:gs.getUserID()`).
    public var dynamicValue: DynamicValue? { DynamicValue(value) }

    /// The condition as encoded-query text.
    public var description: String { EncodedQueryPrinter.print(self) }
}

/// A sort term: `ORDERBY<field>` or `ORDERBYDESC<field>`.
public struct OrderTerm: Sendable, Equatable {
    /// The field name (dot-walking allowed).
    public var field: String
    /// Whether the sort is descending.
    public var descending: Bool

    /// Creates a sort term.
    public init(_ field: String, descending: Bool = false) {
        self.field = field
        self.descending = descending
    }
}

/// Why an encoded query could not be parsed. The message names the offending term.
public struct EncodedQueryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A message a person can act on.
    public let message: String

    /// Creates an error.
    public init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}
