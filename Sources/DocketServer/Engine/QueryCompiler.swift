import DocketModel
import Foundation
import Tracing

/// Turns encoded queries and access rules into parameterised SQL for one table.
///
/// A compiler is used for one statement: dot-walked fields (`caller_id.department.name`) add LEFT JOINs
/// that ``from`` then includes. Values are always bound; names reach SQL only after they matched the
/// catalog, and are quoted even then.
struct QueryCompiler {
    /// What to do with a term naming a field that does not exist.
    enum UnknownFields {
        /// Drop the term, as ServiceNow does for user queries.
        case ignore
        /// Match nothing: used for access conditions, where dropping a term would widen access.
        case matchNothing
        /// Refuse the query, naming the term (and the field meant, where one is close): for people typing queries
        /// (the web UI's search, the CLI), and for the Table API on an instance set to refuse invalid queries.
        case refuse
    }

    /// What a user's query does with a term it cannot use: an unknown field, table or dynamic value.
    var unknownTerms = UnknownFields.ignore

    /// Which fields a term may name.
    enum Scope {
        /// The fields of the queried table.
        case table
        /// Every column of the table's hierarchy (access conditions on `task` name `caller_id`).
        case hierarchy
    }

    /// Bounds checked before any SQL is built, so that no query reaches a database limit (expression depth,
    /// pattern length, tables in a join, bound parameters) and fails there.
    enum Limits {
        /// Conditions in one query, counting every alternative of every clause.
        static let terms = 250
        /// Sort terms in one query.
        static let orderTerms = 20
        /// Fields in one dot-walk (`caller_id.department.name` has 3).
        static let dotWalkDepth = 6
        /// Distinct dot-walk joins in one statement (SQLite joins at most 64 tables).
        static let joins = 32
        /// UTF-8 bytes of a LIKE, STARTSWITH or ENDSWITH value (SQLite's pattern limit is 50,000 escaped).
        static let patternBytes = 10_000
        /// Values in all IN and NOT IN lists of one query together.
        static let listValues = 5_000
        /// JOIN and RLQUERY terms in one query.
        static let subqueries = 8
    }

    /// Counts conditions across a statement, its subqueries included.
    final class Counter {
        var value = 0
    }

    let catalog: SchemaCatalog
    let policy: AccessPolicy
    /// The rules that decide whether a parent record is readable (for journal entries and attachments);
    /// the full policy even when `policy` was narrowed to the rules of one check.
    let parentPolicy: AccessPolicy
    let dialect: StorageDialect
    let caller: Caller
    let now: Date
    let table: SchemaCatalog.Table
    let alias: String
    /// What the main alias reads instead of the table's physical table: a one-row derived table when a
    /// condition is judged on a row as it was at some time (the event log's snapshots).
    var source: SQLFragment? = nil
    private var joins: [SQLFragment] = []
    private var joinAliases: [String: (alias: String, table: SchemaCatalog.Table)] = [:]
    private var listValues = 0
    private var subqueries = 0
    private let termCount: Counter

    init(
        catalog: SchemaCatalog, policy: AccessPolicy, dialect: StorageDialect, caller: Caller, now: Date = Date(),
        table: SchemaCatalog.Table, alias: String = "t", parentPolicy: AccessPolicy? = nil, termCount: Counter = Counter()
    ) {
        self.termCount = termCount
        self.parentPolicy = parentPolicy ?? policy
        self.catalog = catalog
        self.policy = policy
        self.dialect = dialect
        self.caller = caller
        self.now = now
        self.table = table
        self.alias = alias
    }

    /// `physical_table AS t` (or ``source`` as `t`) followed by the joins added so far.
    var from: SQLFragment {
        ([(source ?? SQLFragment.identifier(table.physicalTable)) + " AS " + .identifier(alias)] + joins).joined(" ")
    }

    /// A column of the main table.
    func column(_ name: String) -> SQLFragment { .column(alias, name) }

    /// Whether what was compiled reads the main table alone, under its alias (no join, no other source): one of
    /// the conditions for reading its columns from an `INSERT INTO table AS alias … RETURNING` (a condition may still
    /// reach other tables through a subquery, so the caller must have none either: ``RecordStore/selectPlan``).
    var readsTableAlone: Bool { source == nil && joins.isEmpty }

    /// Restricts a query on a child table to its classes (`incident` and whatever extends it).
    func classFilter() -> SQLFragment? {
        guard table.root != table.name else { return nil }
        return column("sys_class_name") + " IN (" + .bindList(table.descendants) + ")"
    }

    // MARK: Conditions

    /// The SQL condition for a query, or nil when it restricts nothing.
    mutating func condition(
        for query: EncodedQuery, unknownFields: UnknownFields? = nil, scope: Scope = .table
    ) throws(EngineError) -> SQLFragment? {
        let unknownFields = unknownFields ?? unknownTerms
        var groups: [SQLFragment] = []
        for var group in query.groups {
            historyTerms(of: &group)
            var clauses: [SQLFragment] = []
            for clause in group.clauses {
                var alternatives: [SQLFragment] = []
                for term in clause.alternatives {
                    if let sql = try condition(for: term, unknownFields: unknownFields, scope: scope) {
                        try countTerm()
                        alternatives.append(sql)
                    }
                }
                if alternatives.isEmpty { continue }
                clauses.append(alternatives.count == 1 ? alternatives[0] : alternatives.joined(" OR ").parenthesized())
            }
            for subquery in group.subqueries {
                if let sql = try condition(for: subquery, unknownFields: unknownFields) {
                    try countTerm()
                    clauses.append(sql)
                }
            }
            // A group whose every term was dropped matches everything, and so does the whole query.
            if clauses.isEmpty { return nil }
            groups.append(clauses.count == 1 ? clauses[0] : clauses.joined(" AND ").parenthesized())
        }
        if groups.isEmpty { return nil }
        return groups.count == 1 ? groups[0] : groups.joined(" OR ").parenthesized()
    }

    /// `history.<field>` terms (Compass's paths into a record's action history: `history.action_name`,
    /// `history.action_timestamp`, `history.user_name`, …) become one related-list condition on
    /// `sys_wf_history`, so that the terms of a group hold for the same history entry.
    private func historyTerms(of group: inout QueryGroup) {
        guard table.field("history") == nil, catalog.table("sys_wf_history") != nil else { return }
        let prefix = "history."
        let isHistory = { (clause: QueryClause) in clause.alternatives.allSatisfy { $0.field.hasPrefix(prefix) } }
        let history = group.clauses.filter(isHistory)
        guard !history.isEmpty else { return }
        group.clauses.removeAll(where: isHistory)
        let stripped = history.map { clause in
            QueryClause(clause.alternatives.map { term in
                var term = term
                term.field = String(term.field.dropFirst(prefix.count))
                return term
            })
        }
        group.subqueries.append(Subquery(
            .relatedList(field: "document", comparison: .greaterThan, count: 0, manyToMany: false),
            table: "sys_wf_history", query: EncodedQuery(groups: [QueryGroup(clauses: stripped)])
        ))
    }

    /// Counts a condition that reaches SQL. Terms an instance ignores (unknown fields) cost nothing, so a
    /// query may repeat them (pysnc's own tests send 2,300), but no more than ``Limits/terms`` reach SQL.
    private mutating func countTerm() throws(EngineError) {
        termCount.value += 1
        guard termCount.value <= Limits.terms else {
            throw .badRequest(
                "Query too complex", detail: "A query may have at most \(Limits.terms) conditions on known fields"
            )
        }
    }

    // MARK: Subqueries

    /// `JOIN` and `RLQUERY` terms as `EXISTS` or counting subqueries over the other table, which only see the
    /// records the caller may read there. Unknown tables or fields drop the term like any unknown field.
    private mutating func condition(for subquery: Subquery, unknownFields: UnknownFields) throws(EngineError) -> SQLFragment? {
        func nothing(_ reason: @autoclosure () -> String) throws(EngineError) -> SQLFragment? {
            try Self.unusable(unknownFields, reason())
        }
        guard let other = catalog.table(subquery.table) else {
            return try nothing("No table '\(subquery.table.prefix(80))'" + Self.suggestion(subquery.table, among: catalog.tables.map(\.name)))
        }
        subqueries += 1
        guard subqueries <= Limits.subqueries else {
            throw .badRequest("Query too complex", detail: "A query may hold at most \(Limits.subqueries) JOIN or RLQUERY terms")
        }
        var inner = QueryCompiler(
            catalog: catalog, policy: parentPolicy, dialect: dialect, caller: caller, now: now, table: other,
            alias: alias + "s\(subqueries)", termCount: termCount
        )
        let link: SQLFragment
        switch subquery.kind {
        case .join(let tableName, let fieldName, let otherFieldName):
            // The term names the queried table (or one it extends); anything else is not about this query.
            guard table.ancestry.contains(tableName) else {
                return try nothing("A JOIN must start at \(table.name) or a table it extends, not '\(tableName.prefix(80))'")
            }
            guard let field = table.field(fieldName), field.type.isStored else {
                return try nothing(Self.unknownField(fieldName, in: table))
            }
            guard let otherField = other.field(otherFieldName), otherField.type.isStored else {
                return try nothing(Self.unknownField(otherFieldName, in: other))
            }
            link = inner.column(otherField.name) + " = " + column(field.name)
        case .relatedList(let fieldName, _, _, _):
            // History entries name their record by sys_id in `document`, whatever its table.
            let historyLink = other.name == "sys_wf_history" && fieldName == "document"
            guard let field = other.field(fieldName), field.type == .reference || historyLink else {
                return try nothing(
                    other.field(fieldName) == nil
                        ? Self.unknownField(fieldName, in: other) : "'\(fieldName)' of \(other.name) is not a reference"
                )
            }
            link = inner.column(field.name) + " = " + column("sys_id")
        }
        var parts = [link]
        if let classes = inner.classFilter() { parts.append(classes) }
        if let access = try inner.accessFilter(.read) { parts.append(access) }
        if let filter = try inner.condition(for: subquery.query, unknownFields: unknownFields, scope: .table) {
            parts.append(filter)
        }
        let body = " FROM " + inner.from + " WHERE " + parts.joined(" AND ")
        switch subquery.kind {
        case .join:
            return "EXISTS (SELECT 1" + body + ")"
        case .relatedList(_, let comparison, let count, _):
            switch (comparison, count) {
            case (.greaterThan, 0), (.greaterOrEqual, 1): return "EXISTS (SELECT 1" + body + ")"
            case (.equals, 0), (.lessThan, 1), (.lessOrEqual, 0): return "NOT EXISTS (SELECT 1" + body + ")"
            default:
                return "(SELECT COUNT(*)" + body + ")" + SQLFragment(" \(comparison.rawValue == "!=" ? "<>" : comparison.rawValue) ")
                    + .bind(count)
            }
        }
    }

    private mutating func condition(
        for term: QueryCondition, unknownFields: UnknownFields, scope: Scope
    ) throws(EngineError) -> SQLFragment? {
        func nothing(_ reason: @autoclosure () -> String) throws(EngineError) -> SQLFragment? {
            try Self.unusable(unknownFields, reason())
        }
        guard let (column, field) = try resolve(term.field, scope: scope) else {
            return try nothing(unknownPath(term.field))
        }
        var value = term.value
        if value.hasPrefix("javascript:") {
            guard let dynamic = DynamicValue(value) else {
                return try nothing("'\(value.prefix(80))' is not a dynamic value this instance knows")
            }
            value = resolve(dynamic)
        }
        let isText = field.columnKind == .text
        // Strings compare without regard to case, as on an instance (its database's collation): `name=network`
        // finds the group Network. Both sides go through the database's LOWER, and string columns that are looked
        // up by value have an index on LOWER(column) (``SchemaStore/createCaseInsensitiveIndexes(_:db:)``).
        let folds = Self.comparesWithoutCase(field)
        switch term.op {
        case .equals:
            if value.isEmpty { return column + " IS NULL" }
            guard let bound = bindable(value, for: field) else { return "1 = 0" }
            if folds { return "LOWER(" + column + ") = LOWER(" + .bind(bound) + ")" }
            return column + " = " + .bind(bound)
        case .notEquals:
            if value.isEmpty { return column + " IS NOT NULL" }
            guard let bound = bindable(value, for: field) else { return "1 = 1" }
            if folds { return "(" + column + " IS NULL OR LOWER(" + column + ") <> LOWER(" + .bind(bound) + "))" }
            return ("(" + column + " IS NULL OR " + column + " <> " + .bind(bound) + ")")
        case .lessThan, .lessOrEqual, .greaterThan, .greaterOrEqual:
            guard !value.isEmpty, let bound = bindable(value, for: field) else { return "1 = 0" }
            return column + SQLFragment(" \(term.op.rawValue) ") + .bind(bound)
        case .like, .notLike, .startsWith, .endsWith:
            guard value.utf8.count <= Limits.patternBytes else {
                throw .badRequest(
                    "Query too complex",
                    detail: "A \(term.op.rawValue) value may have at most \(Limits.patternBytes) bytes (field \(term.field))"
                )
            }
            let escaped = Self.escapeLike(value.lowercased())
            let pattern: String
            switch term.op {
            case .startsWith: pattern = escaped + "%"
            case .endsWith: pattern = "%" + escaped
            default: pattern = "%" + escaped + "%"
            }
            let text = isText ? column : dialect.castToText(column)
            let match = "LOWER(" + text + ") LIKE " + .bind(pattern) + " ESCAPE '\\'"
            return term.op == .notLike ? "(" + column + " IS NULL OR NOT " + match + ")" : match
        case .in, .notIn:
            let values = value.split(separator: ",", omittingEmptySubsequences: true)
                .compactMap { bindable(String($0), for: field) }
            if values.isEmpty { return term.op == .in ? "1 = 0" : "1 = 1" }
            listValues += values.count
            guard listValues <= Limits.listValues else {
                throw .badRequest(
                    "Query too complex", detail: "IN lists of a query may hold at most \(Limits.listValues) values together"
                )
            }
            let list = folds
                ? "LOWER(" + column + ") IN (" + values.map { "LOWER(" + SQLFragment.bind($0) + ")" }.joined(", ") + ")"
                : column + " IN (" + .bindAnyList(values) + ")"
            return term.op == .in ? list : "(" + column + " IS NULL OR NOT " + list + ")"
        case .isEmpty, .emptyString:
            return isText ? "(" + column + " IS NULL OR " + column + " = '')" : column + " IS NULL"
        case .isNotEmpty:
            return isText ? "(" + column + " IS NOT NULL AND " + column + " <> '')" : column + " IS NOT NULL"
        case .anything:
            return "1 = 1"
        case .between:
            let bounds = value.split(separator: "@", omittingEmptySubsequences: false).map { part -> String in
                let text = String(part)
                return DynamicValue(text).map(resolve) ?? text
            }
            guard bounds.count == 2 else {
                throw .badRequest("Malformed query term '\(term)': BETWEEN takes two values separated by @")
            }
            guard let low = bindable(bounds[0], for: field), let high = bindable(bounds[1], for: field) else {
                return "1 = 0"
            }
            return "(" + column + " >= " + .bind(low) + " AND " + column + " <= " + .bind(high) + ")"
        case .sameAs, .notSameAs:
            guard let (other, _) = try resolve(value, scope: scope) else { return try nothing(unknownPath(value)) }
            return term.op == .sameAs ? column + " = " + other : "(" + column + " IS NULL OR " + column + " <> " + other + ")"
        case .instanceOf:
            guard let target = catalog.table(value) else { return "1 = 0" }
            return column + " IN (" + .bindList(target.descendants) + ")"
        }
    }

    // MARK: Unusable terms

    /// What a term that cannot be used becomes: dropped (nil), matching nothing, or a 400 giving `reason`.
    private static func unusable(_ mode: UnknownFields, _ reason: @autoclosure () -> String) throws(EngineError) -> SQLFragment? {
        switch mode {
        case .ignore: return nil
        case .matchNothing: return "1 = 0"
        case .refuse: throw .badRequest(RecordStore.invalidQueryMessage, detail: reason())
        }
    }

    // MARK: Sorting

    /// `ORDER BY …` for the sort terms; unknown fields are ignored. Always ends with `sys_id` so that paging
    /// is stable; with no terms, records come in creation order.
    mutating func orderBy(_ terms: [OrderTerm]) throws(EngineError) -> SQLFragment {
        guard terms.count <= Limits.orderTerms else {
            throw .badRequest("Query too complex", detail: "A query may sort by at most \(Limits.orderTerms) fields")
        }
        var parts: [SQLFragment] = []
        for term in terms {
            var descending = term.descending
            var resolved = try resolve(term.field, scope: .table)
            // NowData's own documentation writes `ORDERBYpublishedDESC`: where `<name>DESC` is no field but
            // `<name>` is, it means descending order on `<name>`.
            if resolved == nil, !descending, term.field.hasSuffix("DESC"), term.field.count > 4 {
                resolved = try resolve(String(term.field.dropLast(4)), scope: .table)
                descending = resolved != nil
            }
            guard let (column, _) = resolved else {
                if unknownTerms == .refuse { throw .badRequest(RecordStore.invalidQueryMessage, detail: "ORDERBY: " + unknownPath(term.field)) }
                continue
            }
            parts.append(column + SQLFragment(dialect.direction(descending: descending)))
        }
        if parts.isEmpty { parts.append(column("sys_created_on") + SQLFragment(dialect.direction(descending: false))) }
        parts.append(column("sys_id") + SQLFragment(dialect.direction(descending: false)))
        return "ORDER BY " + parts.joined(", ")
    }

    // MARK: Access

    /// ``accessFilter(_:)`` in a span of its own (`access.filter`) when the request is traced (``Traces``).
    mutating func tracedAccessFilter(_ operation: AccessOperation) throws(EngineError) -> SQLFragment? {
        guard let span = Traces.start("access.filter") else { return try accessFilter(operation) }
        defer { span.end() }
        span.attributes["docket.access.operation"] = operation.rawValue
        span.attributes["docket.table"] = table.name
        do {
            let filter = try accessFilter(operation)
            span.attributes["docket.access.restricted"] = filter != nil
            return filter
        } catch {
            Traces.failed(span, error)
            throw error
        }
    }

    /// The records of this table the caller may `operation`, as a condition; nil means all of them.
    mutating func accessFilter(_ operation: AccessOperation) throws(EngineError) -> SQLFragment? {
        if caller.isAdmin { return nil }
        let rules = try ruleFilter(operation)
        // Scoped tables (a `sys_domain` field): only records of the caller's domains, whatever the rules say.
        guard table.field("sys_domain") != nil else { return rules }
        let domains = caller.visibleDomains
        let scope: SQLFragment = domains.isEmpty
            ? "1 = 0" : column("sys_domain") + " IN (" + .bindList(domains.sorted()) + ")"
        guard let rules else { return scope }
        return (rules.parenthesized() + " AND " + scope).parenthesized()
    }

    /// What the access rules alone let the caller `operation`; nil means everything.
    ///
    /// A record's visibility is the same whichever table of its hierarchy is queried: the rules of the queried table
    /// and its ancestors apply to every record, and the rules of a table below it apply to the records of that table
    /// and its descendants (a defect readable through `defect` is readable through `task`).
    private mutating func ruleFilter(_ operation: AccessOperation) throws(EngineError) -> SQLFragment? {
        guard var parts = try ruleParts(policy.rules(for: operation, on: table, caller: caller)) else { return nil }
        for name in table.descendants where name != table.name {
            guard let below = catalog.table(name) else { continue }
            let own = policy.ownRules(for: operation, on: below, caller: caller)
            guard !own.isEmpty else { continue }
            let classes = column("sys_class_name") + " IN (" + .bindList(below.descendants) + ")"
            guard let conditions = try ruleParts(own) else {
                parts.append(classes)
                continue
            }
            if conditions.isEmpty { continue }
            parts.append((classes + " AND " + conditions.joined(" OR ").parenthesized()).parenthesized())
        }
        if parts.isEmpty { return "1 = 0" }
        return parts.count == 1 ? parts[0] : parts.joined(" OR ").parenthesized()
    }

    /// The conditions of rules, each as SQL; nil when one of them grants every record.
    private mutating func ruleParts(_ rules: [AccessRule]) throws(EngineError) -> [SQLFragment]? {
        var parts: [SQLFragment] = []
        for rule in rules {
            switch rule.condition {
            case .always:
                return nil
            case .query(let query):
                guard let sql = try condition(for: query, unknownFields: .matchNothing, scope: .hierarchy) else {
                    return nil
                }
                parts.append(sql)
            case .parentRecordAllows(let parentOperation, let tableColumn, let idColumn):
                parts.append(try parentFilter(parentOperation, tableColumn: tableColumn, idColumn: idColumn))
            }
        }
        return parts
    }

    /// Records that belong to another record (journal entries, attachments) qualify when the caller may perform
    /// `operation` on their parent: `tableColumn` names the parent's table and `idColumn` holds its sys_id.
    private func parentFilter(
        _ operation: AccessOperation, tableColumn: String, idColumn: String
    ) throws(EngineError) -> SQLFragment {
        var parts: [SQLFragment] = []
        let journals = table.name == "sys_journal_field"
        for (index, root) in catalog.roots.enumerated()
        where root.name != table.root && !Self.childTables.contains(root.name) && (!journals || hasJournals(root)) {
            var parent = QueryCompiler(
                catalog: catalog, policy: parentPolicy, dialect: dialect, caller: caller, now: now, table: root,
                alias: alias + "p\(index)"
            )
            let classes = column(tableColumn) + " IN (" + .bindList(root.descendants) + ")"
            guard let filter = try parent.accessFilter(operation) else {
                parts.append(classes)
                continue
            }
            parts.append(
                "(" + classes + " AND " + column(idColumn) + " IN (SELECT " + parent.column("sys_id") + " FROM "
                    + parent.from + " WHERE " + filter + "))"
            )
        }
        if parts.isEmpty { return "1 = 0" }
        return parts.joined(" OR ").parenthesized()
    }

    /// Tables whose records only exist as parts of another record; never parents themselves.
    private static let childTables: Set<String> = ["sys_journal_field", "sys_attachment"]

    private func hasJournals(_ root: SchemaCatalog.Table) -> Bool {
        root.descendants.contains { catalog.table($0)?.journalFields.isEmpty == false }
    }

    // MARK: Fields and values

    /// The SQL column for a (possibly dot-walked) field name, adding joins as needed; nil when unknown.
    mutating func resolve(_ name: String, scope: Scope) throws(EngineError) -> (SQLFragment, FieldDefinition)? {
        let path = name.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard let first = path.first else { return nil }
        guard path.count <= Limits.dotWalkDepth else {
            throw .badRequest(
                "Query too complex", detail: "A dot-walk may name at most \(Limits.dotWalkDepth) fields: \(name.prefix(200))"
            )
        }
        let field = scope == .hierarchy ? catalog.hierarchyField(first, in: table) : table.field(first)
        guard var current = field else { return nil }
        var currentAlias = alias
        for (index, segment) in path.dropFirst().enumerated() {
            guard try checkQueryable(current), current.type == .reference, let targetName = current.reference,
                let target = catalog.table(targetName), let next = target.field(segment)
            else { return nil }
            let key = path[...index].joined(separator: ".")
            if let existing = joinAliases[key] {
                currentAlias = existing.alias
            } else {
                guard joinAliases.count < Limits.joins else {
                    throw .badRequest(
                        "Query too complex", detail: "A query may dot-walk through at most \(Limits.joins) references"
                    )
                }
                let joinAlias = alias + "j\(joinAliases.count + 1)"
                var on = SQLFragment.column(joinAlias, "sys_id") + " = " + .column(currentAlias, current.name)
                // A dot-walk only sees referenced records the caller may read, so it cannot be used to probe
                // hidden ones.
                var visible = QueryCompiler(
                    catalog: catalog, policy: policy, dialect: dialect, caller: caller, now: now, table: target,
                    alias: joinAlias
                )
                if let filter = try visible.accessFilter(.read) {
                    on += " AND " + (visible.joins.isEmpty ? filter : "1 = 0")
                }
                joins.append(
                    "LEFT JOIN " + .identifier(target.physicalTable) + " AS " + .identifier(joinAlias) + " ON "
                        + on
                )
                joinAliases[key] = (joinAlias, target)
                currentAlias = joinAlias
            }
            current = next
        }
        guard try checkQueryable(current) else { return nil }
        return (.column(currentAlias, current.name), current)
    }

    private func checkQueryable(_ field: FieldDefinition) throws(EngineError) -> Bool {
        if field.type == .password { throw .forbiddenQuery }
        return field.type.isStored
    }

    private func resolve(_ dynamic: DynamicValue) -> String {
        dynamic.resolve(userID: caller.userID, userName: caller.userName, now: now)
    }

    /// The value as the column stores it, or nil when it cannot be one (text in an integer column).
    func bindable(_ value: String, for field: FieldDefinition) -> (any Encodable & Sendable)? {
        switch field.type {
        case .integer: return Int(value)
        case .decimal: return Double(value)
        case .boolean:
            switch value.lowercased() {
            case "true", "1": return 1
            case "false", "0": return 0
            default: return nil
            }
        case .glideDateTime: return GlideDateTime.normalize(value) ?? value
        default: return value
        }
    }

    /// Whether `=`, `!=` and `IN` on a field ignore case: on strings and choices, not on sys_ids, references,
    /// table names, numbers or dates.
    static func comparesWithoutCase(_ field: FieldDefinition) -> Bool {
        (field.type == .string || field.type == .choice) && field.name != "sys_id"
    }

    static func escapeLike(_ value: String) -> String {
        var result = ""
        for char in value {
            if char == "%" || char == "_" || char == "\\" { result.append("\\") }
            result.append(char)
        }
        return result
    }
}
