import DocketModel
import Foundation
import Hummingbird

/// Team lists: any table the caller may read as a list, with the columns they choose, sorted by a column, filtered
/// by conditions built from menus (the encoded query shown and editable), grouped by a field with counts, paged,
/// saved per user (a `sys_user_preference`), and updated live like My work.
struct WebLists {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let pages: WebPages

    static let pageSize = 50
    static let maxColumns = 12
    static let maxGroups = 100

    /// What a list shows; its URL's parameters say all of it, so a list is a link that can be kept or shared.
    struct State: Sendable, Equatable {
        var query = ""
        var columns: [String] = []
        var sort: String?
        var descending = false
        var group: String?
        var page = 1
        /// The table's default columns: when the list shows those, its URL does not name them.
        var defaults: [String] = []

        init() {}

        init(_ pairs: [(name: String, value: String)]) {
            for (name, value) in pairs {
                switch name {
                case "q": query = String(value.prefix(4000))
                case "columns": columns += value.split(separator: ",").map { String($0.prefix(80)) }
                case "col": columns.append(String(value.prefix(80)))
                case "sort": sort = value.isEmpty ? nil : String(value.prefix(80))
                case "dir": descending = value == "desc"
                case "group": group = value.isEmpty ? nil : String(value.prefix(80))
                case "page": page = Int(value.prefix(9)).map { min(max($0, 1), 100_000) } ?? 1
                default: break
                }
            }
            columns = Array(columns.prefix(WebLists.maxColumns * 4))
        }

        /// The query string of this list (`page` left out on the first page).
        func parameters(page: Int? = nil) -> String {
            var parts: [String] = []
            func add(_ name: String, _ value: String) { parts.append(name + "=" + WebLists.escape(value)) }
            if !query.isEmpty { add("q", query) }
            if !columns.isEmpty, columns != defaults { add("columns", columns.joined(separator: ",")) }
            if let sort {
                add("sort", sort)
                if descending { add("dir", "desc") }
            }
            if let group { add("group", group) }
            let page = page ?? self.page
            if page > 1 { add("page", String(page)) }
            return parts.joined(separator: "&")
        }
    }

    struct Header: Sendable {
        var label: String
        var href: String
        var ariaSort: String
        var arrow: String?
    }

    struct Cell: Sendable {
        var text: String
        var href: String?
    }

    struct Row: Sendable {
        var sysID: String
        var cells: [Cell]
        var groupHeading: GroupHeading?
    }

    struct GroupHeading: Sendable {
        var label: String
        /// The group's count, when it is among the groups counted.
        var count: Int
        var hasCount: Bool
        var span: Int
    }

    struct GroupCount: Sendable {
        var label: String
        var count: Int
        var href: String
    }

    struct Chip: Sendable {
        var text: String
        var remove: String
    }

    struct Choice: Sendable {
        var value: String
        var label: String
        var selected: Bool
    }

    /// The operators the filter's menu offers, as ServiceNow's condition builder names them.
    static let operators: [(op: QueryOperator, label: String)] = [
        (.equals, "is"), (.notEquals, "is not"), (.like, "contains"), (.notLike, "does not contain"),
        (.startsWith, "starts with"), (.isEmpty, "is empty"), (.isNotEmpty, "is not empty"),
        (.greaterThan, "is more than"), (.lessThan, "is less than"), (.greaterOrEqual, "is at least"),
        (.lessOrEqual, "is at most"), (.in, "is one of"),
    ]

    func add(to router: Router<Context>) {
        router.get("/app/lists") { _, context in try await index(context: context) }
        router.get("/app/list/:table") { request, context in try await list(request, context: context) }
        router.post("/app/list/:table/save") { request, context in try await save(request, context: context, forget: false) }
        router.post("/app/list/:table/forget") { request, context in try await save(request, context: context, forget: true) }
    }

    static func escape(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")) ?? ""
    }

    static func path(_ table: String, _ state: State, page: Int? = nil) -> String {
        let parameters = state.parameters(page: page)
        return "/app/list/\(table)" + (parameters.isEmpty ? "" : "?" + parameters)
    }

    /// The fields a list may show, filter, sort or group by: stored ones, not passwords or journals; the main
    /// fields first, then the rest by label.
    static func listFields(of table: SchemaCatalog.Table) -> [FieldDefinition] {
        var seen = Set<String>()
        let main = WebFields.mainFields(of: table).filter { seen.insert($0.name).inserted }
        let usable: (FieldDefinition) -> Bool = { $0.type.isStored && $0.type != .password && $0.type != .journal }
        let rest = table.fields.filter { usable($0) && !seen.contains($0.name) }.sorted { $0.label < $1.label }
        return main.filter(usable) + rest
    }

    /// Whether a list may be grouped by a field: a value many records share (not a date, a long text or an id).
    static func isGroupable(_ field: FieldDefinition) -> Bool {
        field.type != .glideDateTime && field.maxLength <= 255 && field.name != "sys_id" && field.name != "number"
    }

    static func defaultColumns(of table: SchemaCatalog.Table) -> [String] {
        let preferred = ["number", "short_description", "state", "priority", "assigned_to", "assignment_group", "sys_updated_on"]
        let columns = preferred.filter { table.field($0) != nil }
        if columns.count >= 3 { return columns }
        var names = [table.displayField].compactMap { $0 } + listFields(of: table).map(\.name).filter { !$0.hasPrefix("sys_") }
        var seen = Set<String>()
        names = names.filter { seen.insert($0).inserted }
        return Array(names.prefix(5)) + (table.field("sys_updated_on") != nil ? ["sys_updated_on"] : [])
    }

    static func preferenceName(_ table: String) -> String { "docket.list.\(table)" }

    // MARK: The list

    @Sendable func list(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let tableName = context.parameters.get("table") ?? ""
        guard let table = store.catalog.table(tableName), store.mayRead(in: tableName, caller: caller) else {
            throw WebError(.notFound, "There is no list called \(tableName.prefix(80)), or you may not see it.")
        }
        let pairs = WebForm.pairs(String((request.uri.query ?? "").prefix(16_384)))
        let given = Dictionary(pairs.map { ($0.name, $0.value) }, uniquingKeysWith: { _, last in last })
        var values: [String: Any] = ["title": table.label, "onLists": true, "table": table.name, "tableLabel": table.label]
        // A list opened without parameters is the one the caller saved, if any.
        var state = State(pairs)
        let saved = try await savedState(of: table.name, caller: caller)
        if pairs.allSatisfy({ $0.name == "saved" }), let saved { state = saved }
        if given["saved"] != nil { values["flash"] = "Saved: this is your list of \(table.label) from now on." }
        if saved != nil { values["hasSaved"] = true }

        let fields = Self.listFields(of: table)
        let known = Set(fields.map(\.name))
        state.columns = state.columns.filter { known.contains($0) }
        var seen = Set<String>()
        state.columns = Array(state.columns.filter { seen.insert($0).inserted }.prefix(Self.maxColumns))
        state.defaults = Self.defaultColumns(of: table)
        if state.columns.isEmpty { state.columns = state.defaults }
        if let sort = state.sort, !known.contains(sort) { state.sort = nil }
        if let group = state.group, table.field(group).map({ !known.contains(group) || !Self.isGroupable($0) }) ?? true { state.group = nil }

        // "Add condition": the menus' choice becomes a term of the encoded query, then the list's own URL.
        if let name = given["add_field"], !name.isEmpty {
            do {
                let term = try await condition(
                    field: name, op: given["add_op"] ?? "=", value: given["add_value"] ?? "", in: table, caller: caller
                )
                let current = state.query.isEmpty ? EncodedQuery() : try EncodedQuery(state.query)
                state.query = current.and(term).description
                state.page = 1
                return WebAPI.redirect(Self.path(table.name, state))
            } catch let problem as ListProblem {
                values["formError"] = problem.message
            } catch let error as EncodedQueryError {
                values["formError"] = "The list's query is not valid, so nothing can be added to it: \(error.message)"
            } catch let problem as ReferenceProblem {
                values["formError"] = problem.message
            }
        }

        var query = EncodedQuery()
        var usable = true
        do {
            query = try EncodedQuery(state.query)
            try store.check(query, in: table, caller: caller)
        } catch let error as EncodedQueryError {
            values["queryError"] = "That query is not valid: \(error.message)"
            usable = false
        } catch let error as EngineError {
            values["queryError"] = "That query cannot run: \(error.detail ?? error.message)"
            usable = false
        }
        values["query"] = state.query

        let renderer = RecordRenderer(
            catalog: store.catalog, mode: .display, excludeReferenceLink: true, baseURL: "", data: DisplayData(), timeZone: caller.timeZone
        )
        let columns = state.columns.compactMap { table.field($0) }
        let groupField = state.group.flatMap { table.field($0) }
        var rows: [Row] = []
        var groupCounts: [GroupCount] = []
        var total = 0
        if usable {
            var ordered = query
            if let sort = state.sort {
                ordered.orderBy = [OrderTerm(sort, descending: state.descending)]
            } else if ordered.orderBy.isEmpty, table.field("sys_updated_on") != nil {
                ordered.orderBy = [OrderTerm("sys_updated_on", descending: true)]
            }
            if let groupField { ordered.orderBy.insert(OrderTerm(groupField.name), at: 0) }
            var unordered = query
            unordered.orderBy = []
            do {
                var counted: [(value: String, count: Int)] = []
                if let groupField {
                    // The first groups in the list's order (one more, to know there are more): a field with a value per
                    // record cannot make a page of a million groups.
                    var request = AggregateRequest(table: table.name, query: unordered, count: true, groupBy: [groupField.name])
                    request.limit = Self.maxGroups + 1
                    counted = try await store.aggregate(request, caller: caller).map { ($0.values.first ?? "", $0.count ?? 0) }
                }
                let wanted = ["sys_id", "sys_class_name"] + columns.map(\.name) + (groupField.map { [$0.name] } ?? [])
                let page = try await store.list(
                    RecordQuery(
                        table: table.name, query: ordered, fields: wanted, limit: Self.pageSize,
                        offset: (state.page - 1) * Self.pageSize, count: true
                    ),
                    caller: caller
                )
                total = page.total ?? page.records.count
                // A page past the end (an old link, a hand-made URL) goes to the last page there is.
                let last = max(1, (total + Self.pageSize - 1) / Self.pageSize)
                if state.page > last { return WebAPI.redirect(Self.path(table.name, state, page: last)) }
                // Display values of the references shown (columns, group values, the chips' values).
                var references: [String: Set<String>] = [:]
                for field in columns + (groupField.map { [$0] } ?? []) where field.type == .reference {
                    guard let target = field.reference else { continue }
                    for record in page.records where !record[field.name].isEmpty { references[target, default: []].insert(record[field.name]) }
                }
                if let groupField, groupField.type == .reference, let target = groupField.reference {
                    for (value, _) in counted.prefix(Self.maxGroups) where !value.isEmpty { references[target, default: []].insert(value) }
                }
                for condition in query.conditions where condition.dynamicValue == nil && !condition.value.isEmpty {
                    if let field = table.field(condition.field), field.type == .reference, let target = field.reference {
                        references[target, default: []].formUnion(condition.value.split(separator: ",").prefix(50).map(String.init))
                    }
                }
                let names = try await store.displayValues(references, caller: caller)
                let resultColumns = Dictionary(page.columns.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
                func display(_ field: FieldDefinition, _ value: String, in record: Record?) -> String {
                    if value.isEmpty { return "" }
                    if field.type == .reference { return names[field.reference ?? ""]?[value] ?? value }
                    if let choices = store.catalog.choices(for: field.name, in: table), let choice = choices.first(where: { $0.value == value }) {
                        return choice.label
                    }
                    if let record, let column = resultColumns[field.name] { return renderer.displayValue(of: column, in: record) }
                    return value
                }
                let countByValue = Dictionary(counted.map { ($0.value, $0.count) }, uniquingKeysWith: { a, _ in a })
                var previous: String? = nil
                for record in page.records {
                    var heading: GroupHeading? = nil
                    if let groupField, record[groupField.name] != previous {
                        previous = record[groupField.name]
                        let label = display(groupField, record[groupField.name], in: record)
                        heading = GroupHeading(
                            label: "\(groupField.label): \(label.isEmpty ? "(empty)" : label)",
                            count: countByValue[record[groupField.name]] ?? 0, hasCount: countByValue[record[groupField.name]] != nil,
                            span: columns.count
                        )
                    }
                    let cells = columns.enumerated().map { index, field in
                        Cell(
                            text: display(field, record[field.name], in: record),
                            href: index == 0 ? "/app/item/\(record.table)/\(record.sysID)" : nil
                        )
                    }
                    // The first cell always links to the item, even when its value is empty.
                    var linked = cells
                    if let first = linked.first, first.text.isEmpty { linked[0].text = "(open)" }
                    rows.append(Row(sysID: record.sysID, cells: linked, groupHeading: heading))
                }
                if let groupField {
                    groupCounts = counted.prefix(Self.maxGroups).map { value, count in
                        var narrowed = state
                        narrowed.group = nil
                        narrowed.page = 1
                        let term = value.isEmpty ? EncodedQuery.where(groupField.name, .isEmpty) : EncodedQuery.where(groupField.name, .equals, value)
                        narrowed.query = query.and(term).description
                        let label = display(groupField, value, in: nil)
                        return GroupCount(label: label.isEmpty ? "(empty)" : label, count: count, href: Self.path(table.name, narrowed))
                    }
                    if counted.count > Self.maxGroups { values["groupsCut"] = "The first \(Self.maxGroups) groups; there are more." }
                }
                let shownChips = chips(of: query, table: table, state: state, display: { field, value in display(field, value, in: nil) }, names: names)
                values["chips"] = shownChips
                if !shownChips.isEmpty { values["hasChips"] = true }
            } catch let error as EngineError where [.badRequest, .forbiddenQuery, .invalidTable, .forbidden].contains(error.code) {
                values["queryError"] = "That query cannot run: \(error.detail ?? error.message)"
            }
            values["live"] = ["table": table.name, "query": unordered.description]
        }

        values["headers"] = columns.map { field -> Header in
            var next = state
            next.page = 1
            let sorted = state.sort == field.name
            next.sort = field.name
            next.descending = sorted && !state.descending
            return Header(
                label: field.label, href: Self.path(table.name, next),
                ariaSort: sorted ? (state.descending ? "descending" : "ascending") : "none",
                arrow: sorted ? (state.descending ? "▼" : "▲") : nil
            )
        }
        values["rows"] = rows
        if !rows.isEmpty { values["hasRows"] = true }
        if state.query.isEmpty { values["noConditions"] = true }
        values["columnCount"] = columns.count
        if !groupCounts.isEmpty {
            values["groupCounts"] = groupCounts
            values["hasGroups"] = true
        }
        let pageCount = max(1, (total + Self.pageSize - 1) / Self.pageSize)
        let shown = min(state.page, pageCount)
        values["summary"] = total == 0
            ? (usable ? "No records match." : "Fix the query to see the list.")
            : "\(total) record\(total == 1 ? "" : "s")" + (pageCount > 1 ? ", page \(shown) of \(pageCount)" : "")
        if pageCount > 1 {
            var paging: [String: Any] = ["page": shown, "pages": pageCount]
            if shown > 1 { paging["previous"] = Self.path(table.name, state, page: shown - 1) }
            if shown < pageCount { paging["next"] = Self.path(table.name, state, page: shown + 1) }
            values["paging"] = paging
        }
        values["fieldChoices"] = fields.map { Choice(value: $0.name, label: "\($0.label) (\($0.name))", selected: false) }
        values["operators"] = Self.operators.map { Choice(value: $0.op.rawValue, label: $0.label, selected: false) }
        values["columnChoices"] = fields.map { Choice(value: $0.name, label: $0.label, selected: state.columns.contains($0.name)) }
        values["groupChoices"] = fields.filter(Self.isGroupable)
            .map { Choice(value: $0.name, label: $0.label, selected: state.group == $0.name) }
        values["state"] = [
            "q": state.query, "columns": state.columns.joined(separator: ","), "sort": state.sort ?? "",
            "dir": state.descending ? "desc" : "", "group": state.group ?? "",
        ]
        values["selfPath"] = Self.path(table.name, state)
        return pages.page("list", values, context: context)
    }

    /// What the menus' choice is as a term of the query: the field checked against the table, a choice's label
    /// taken for its value, a reference's name for its sys_id (with "is" and "is not").
    func condition(field name: String, op: String, value: String, in table: SchemaCatalog.Table, caller: Caller) async throws -> EncodedQuery {
        guard let field = Self.listFields(of: table).first(where: { $0.name == name }) else {
            throw ListProblem(message: "\(table.label) has no field \(name.prefix(80)) to filter on.")
        }
        guard let op = Self.operators.first(where: { $0.op.rawValue == op })?.op else {
            throw ListProblem(message: "Choose an operator from the list.")
        }
        var text = value.trimmingCharacters(in: .whitespacesAndNewlines)
        if op.isUnary { return .where(field.name, op) }
        guard !text.isEmpty else { throw ListProblem(message: "Give a value for \(field.label), or choose “is empty”.") }
        guard text.count <= 200, !text.contains("^"), !text.contains(where: \.isNewline) else {
            throw ListProblem(message: "A value may not hold ^ or a line break, and is at most 200 characters.")
        }
        if let choices = store.catalog.choices(for: field.name, in: table), !choices.isEmpty, op == .equals || op == .notEquals {
            if !choices.contains(where: { $0.value == text }) {
                // A label as typed ("In Progress", "critical" for "1 - Critical"): the same label, or the one label
                // that holds the words.
                let exact = choices.first { $0.label.caseInsensitiveCompare(text) == .orderedSame }
                let holding = choices.filter { $0.label.range(of: text, options: .caseInsensitive) != nil }
                guard let choice = exact ?? (holding.count == 1 ? holding.first : nil) else {
                    let list = choices.prefix(12).map { "\($0.label) (\($0.value))" }.joined(separator: ", ")
                    throw ListProblem(message: "‘\(text.prefix(80))’ is not one of the \(field.label) values: \(list).")
                }
                text = choice.value
            }
        } else if field.type == .reference, op == .equals || op == .notEquals {
            text = try await store.resolveReference(text, field: field, keeping: ("", ""), caller: caller)
        }
        return .where(field.name, op, text)
    }

    /// The query's conditions as chips, each with the list without it; only for a query that is one AND-group of
    /// plain conditions (anything else is shown and edited as the encoded query).
    private func chips(
        of query: EncodedQuery, table: SchemaCatalog.Table, state: State, display: (FieldDefinition, String) -> String,
        names: [String: [String: String]]
    ) -> [Chip] {
        guard query.groups.count == 1, let group = query.groups.first, group.subqueries.isEmpty,
            group.clauses.allSatisfy({ $0.alternatives.count == 1 })
        else { return [] }
        return group.clauses.enumerated().map { index, clause in
            let condition = clause.alternatives[0]
            let field = table.field(condition.field)
            let label = field?.label ?? condition.field
            let opLabel = Self.operators.first { $0.op == condition.op }?.label ?? condition.op.rawValue
            var value = condition.value
            if let field, field.type != .reference || condition.dynamicValue == nil { value = display(field, value) }
            if condition.dynamicValue != nil, condition.value.contains("gs.getUserID") { value = "me" }
            var remaining = group.clauses
            remaining.remove(at: index)
            var without = state
            without.page = 1
            without.query = EncodedQuery(groups: remaining.isEmpty ? [] : [QueryGroup(clauses: remaining)], orderBy: query.orderBy).description
            return Chip(text: [label, opLabel, condition.op.isUnary ? "" : value].filter { !$0.isEmpty }.joined(separator: " "), remove: Self.path(table.name, without))
        }
    }

    // MARK: Saved lists

    /// The caller's kept list of a table: the first kept (two saves at once may both have added one; the next
    /// save removes the others).
    private func savedRecords(of table: String, caller: Caller) async throws -> [Record] {
        try await store.list(
            RecordQuery(
                table: "sys_user_preference",
                query: EncodedQuery.where("user", .equals, caller.userID).and("name", .equals, Self.preferenceName(table))
                    .orderBy("sys_created_on").orderBy("sys_id"),
                fields: ["sys_id", "value"], limit: 20, count: false
            ),
            caller: caller
        ).records
    }

    private func savedRecord(of table: String, caller: Caller) async throws -> Record? {
        try await savedRecords(of: table, caller: caller).first
    }

    func savedState(of table: String, caller: Caller) async throws -> State? {
        try await savedRecord(of: table, caller: caller).map { State(WebForm.pairs($0["value"])) }
    }

    /// `POST /app/list/TABLE/save` keeps the list as shown (without its page) as the caller's list of the table;
    /// `…/forget` removes it.
    @Sendable func save(_ request: Request, context: Context, forget: Bool) async throws -> Response {
        let caller = try context.requireCaller()
        let form = try await WebForm.read(request, context: context, sessions: pages.sessions)
        let tableName = context.parameters.get("table") ?? ""
        guard store.catalog.table(tableName) != nil, store.mayRead(in: tableName, caller: caller) else {
            throw WebError(.notFound, "There is no list called \(tableName.prefix(80)), or you may not see it.")
        }
        let kept = try await savedRecords(of: tableName, caller: caller)
        for extra in kept.dropFirst(forget ? 0 : 1) {
            do {
                try await store.delete(extra.sysID, from: "sys_user_preference", caller: caller)
            } catch let error as EngineError where error.code == .notFound {
                // Another request removed it first.
            }
        }
        if forget { return WebAPI.redirect("/app/list/\(tableName)") }
        let existing = kept.first
        var state = State(form.fields.map { ($0.key, $0.value) }.sorted { $0.0 < $1.0 })
        state.page = 1
        let value = state.parameters()
        guard value.utf8.count <= 4000 else { throw WebError(.badRequest, "This list is too long to keep; shorten its query.") }
        var updated = false
        if let existing {
            do {
                try await store.update(existing.sysID, in: "sys_user_preference", values: ["value": value], caller: caller)
                updated = true
            } catch let error as EngineError where error.code == .notFound {
                // A save at the same time saw another one first and removed this one: this save keeps its own (the
                // next save leaves one).
            }
        }
        if !updated {
            _ = try await store.insert(
                into: "sys_user_preference",
                values: ["name": Self.preferenceName(tableName), "value": value, "description": "The web UI's list of \(tableName)"],
                caller: caller
            )
        }
        return WebAPI.redirect("/app/list/\(tableName)?" + (value.isEmpty ? "" : value + "&") + "saved=1")
    }

    // MARK: The index

    /// `GET /app/lists`: the caller's saved lists, then every table they may read.
    @Sendable func index(context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let savedNames = try await store.list(
            RecordQuery(
                table: "sys_user_preference",
                query: EncodedQuery.where("user", .equals, caller.userID).and("name", .startsWith, "docket.list."),
                fields: ["name"], limit: 200, count: false
            ),
            caller: caller
        ).records.map { String($0["name"].dropFirst("docket.list.".count)) }
        let readable = store.catalog.tables.filter { store.mayRead(in: $0.name, caller: caller) }.sorted { $0.label < $1.label }
        let entry: (SchemaCatalog.Table) -> [String: String] = { ["table": $0.name, "label": $0.label] }
        let work = readable.filter { $0.ancestry.contains("task") }
        let saved = savedNames.compactMap { name in readable.first { $0.name == name } }
        var values: [String: Any] = [
            "title": "Lists", "onLists": true, "work": work.map(entry),
            "others": readable.filter { !$0.ancestry.contains("task") }.map(entry),
        ]
        if !saved.isEmpty {
            values["saved"] = saved.map(entry)
            values["hasSaved"] = true
        }
        return pages.page("lists", values, context: context)
    }
}

/// A filter the menus cannot make, said next to them.
struct ListProblem: Error {
    var message: String
}
