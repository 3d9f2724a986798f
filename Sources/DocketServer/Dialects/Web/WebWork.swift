import DocketModel
import Foundation
import Hummingbird

/// "My work": the caller's active items grouped by type, assigned to them or opened by them, searchable, paged.
struct WebWork {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let pages: WebPages

    static let pageSize = 50

    struct Item: Sendable {
        var table: String
        var sysID: String
        var number: String
        var shortDescription: String
        var state: String
        var priority: String?
        var created: String
        var age: String
    }

    struct Group: Sendable {
        var table: String
        var label: String
        var count: Int
        var items: [Item]
    }

    func add(to router: Router<Context>) {
        router.get("/app/work") { request, context in try await work(request, context: context) }
        router.get("/app/lookup/:table") { request, context in try await lookup(request, context: context) }
    }

    /// The tables with an assignee whose records My work lists: the topmost of each hierarchy (`task` covers
    /// incidents, problems, changes and defects).
    func tables() -> [SchemaCatalog.Table] {
        store.catalog.tables.filter { table in
            guard let field = table.field("assigned_to"), field.reference == "sys_user", table.field("active") != nil else { return false }
            return !table.ancestry.dropFirst().contains { store.catalog.table($0)?.field("assigned_to") != nil }
        }
    }

    /// The query of a view: assigned to me (or opened by me), active, and the search.
    static func query(view: String, search: String) throws -> EncodedQuery {
        let who = view == "opened" ? "opened_by" : "assigned_to"
        var query = EncodedQuery.where(who, .equals, "javascript:gs.getUserID()").and("active", .equals, "true")
        let text = search.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { return query }
        if looksEncoded(text) {
            let given = try EncodedQuery(text)
            // Each alternative group of the given query is narrowed to my active items.
            if given.groups.isEmpty {
                query.orderBy = given.orderBy
            } else {
                query = EncodedQuery(
                    groups: given.groups.map { QueryGroup(clauses: query.groups[0].clauses + $0.clauses) }, orderBy: given.orderBy
                )
            }
        } else {
            for word in text.split(whereSeparator: \.isWhitespace).prefix(8) {
                query = query.and("short_description", .like, String(word.prefix(100))).or("number", .like, String(word.prefix(100)))
            }
        }
        return query
    }

    /// Text a person who knows encoded queries would type: a condition with an operator, `^`, or ORDERBY.
    static func looksEncoded(_ text: String) -> Bool {
        text.contains("=") || text.contains("^") || text.hasPrefix("ORDERBY") || text.contains("LIKE")
            || text.contains("ISEMPTY") || text.contains("ISNOTEMPTY") || text.contains("STARTSWITH")
    }

    @Sendable func work(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        // A GET form's query, decoded as a form (`+` is a space).
        let parameters = WebForm.decode(request.uri.query ?? "")
        let view = parameters["view"] == "opened" ? "opened" : "assigned"
        let search = String((parameters["q"] ?? "").prefix(1000))
        let requestedPage = parameters["page"].flatMap { Int($0) }.map { min(max($0, 1), 100_000) } ?? 1
        var values: [String: Any] = [
            "title": "My work", "view": view, "onWork": true,
            view: true,
        ]
        if !search.isEmpty { values["search"] = search }
        if let deleted = parameters["deleted"] {
            values["flash"] = deleted.isEmpty ? "The item was deleted." : "\(deleted.prefix(40)) was deleted."
        }
        var query: EncodedQuery
        do {
            query = try Self.query(view: view, search: search)
        } catch let error as EncodedQueryError {
            values["queryError"] = "That search is not a valid encoded query: \(error.message)"
            query = try Self.query(view: view, search: "")
        }
        // A search naming a field no type of item has (a typo) is refused with the field meant; one that some types
        // cannot use (a defect's field) lists only the types it applies to, rather than ignoring the term for the others.
        let all = tables()
        var searched = all
        if values["queryError"] == nil, Self.looksEncoded(search) {
            var refusals: [String] = []
            var usable: [SchemaCatalog.Table] = []
            for table in all {
                do {
                    try store.check(query, in: table, caller: caller)
                    usable.append(table)
                } catch {
                    refusals.append(error.detail ?? error.message)
                }
            }
            searched = usable
            if searched.isEmpty {
                values["queryError"] = "That search cannot run: \(refusals.first ?? "it names no field of your items")"
                query = try Self.query(view: view, search: "")
                searched = all
            } else if searched.count < all.count {
                let left = all.filter { table in !searched.contains { $0.name == table.name } }
                values["queryNote"] = "Only " + searched.map(\.label).joined(separator: ", ") + " are searched: "
                    + left.map(\.label).joined(separator: ", ") + (left.count == 1 ? " has" : " have") + " no such field."
            }
        }
        var groups: [Group] = []
        var total = 0
        var skip = (requestedPage - 1) * Self.pageSize
        var room = Self.pageSize
        var liveTable = "task"
        do {
            for table in searched {
                liveTable = table.name
                // Counts per type, then this page's share of the list, ordered by type.
                let counts = try await counts(in: table, query: query, caller: caller)
                let tableTotal = counts.reduce(0) { $0 + $1.count }
                total += tableTotal
                guard room > 0, skip < tableTotal else {
                    skip = max(0, skip - tableTotal)
                    continue
                }
                var ordered = query
                if table.isInHierarchy { ordered.orderBy.insert(OrderTerm("sys_class_name"), at: 0) }
                if ordered.orderBy.count == (table.isInHierarchy ? 1 : 0) {
                    ordered.orderBy.append(OrderTerm("sys_updated_on", descending: true))
                }
                let page = try await store.list(
                    RecordQuery(
                        table: table.name, query: ordered,
                        fields: ["sys_id", "number", "short_description", "state", "priority", "sys_created_on", "opened_at", "sys_class_name"],
                        limit: room, offset: skip, count: false
                    ),
                    caller: caller
                )
                skip = 0
                room -= page.records.count
                let renderer = RecordRenderer(
                    catalog: store.catalog, mode: .display, excludeReferenceLink: true, baseURL: "", data: DisplayData(),
                    timeZone: caller.timeZone
                )
                let columns = Dictionary(page.columns.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
                for record in page.records {
                    func display(_ name: String) -> String {
                        columns[name].map { renderer.displayValue(of: $0, in: record) } ?? record[name]
                    }
                    let opened = record["opened_at"].isEmpty ? record["sys_created_on"] : record["opened_at"]
                    let item = Item(
                        table: record.table, sysID: record.sysID, number: record["number"],
                        shortDescription: record["short_description"], state: display("state"),
                        priority: display("priority").isEmpty ? nil : display("priority"),
                        created: display(record["opened_at"].isEmpty ? "sys_created_on" : "opened_at"),
                        age: Self.age(since: opened)
                    )
                    if let last = groups.indices.last, groups[last].table == record.table {
                        groups[last].items.append(item)
                    } else {
                        let label = store.catalog.table(record.table)?.label ?? record.table
                        let count = counts.first { $0.table == record.table }?.count ?? 0
                        groups.append(Group(table: record.table, label: label, count: count, items: [item]))
                    }
                }
            }
        } catch let error as EngineError where error.code == .badRequest || error.code == .forbiddenQuery || error.code == .invalidTable {
            values["queryError"] = "That search cannot run: \(error.detail ?? error.message)"
        }
        let pageCount = max(1, (total + Self.pageSize - 1) / Self.pageSize)
        let page = min(requestedPage, pageCount)
        values["groups"] = groups
        values["summary"] = total == 0 ? "No active items." : "\(total) active item\(total == 1 ? "" : "s")" + (pageCount > 1 ? ", page \(page) of \(pageCount)" : "")
        if pageCount > 1 {
            func link(_ page: Int) -> String {
                var link = "/app/work?view=\(view)&page=\(page)"
                if !search.isEmpty { link += "&q=" + (search.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "") }
                return link
            }
            var paging: [String: Any] = ["page": page, "pages": pageCount]
            if page > 1 { paging["previous"] = link(page - 1) }
            if page < pageCount { paging["next"] = link(page + 1) }
            values["paging"] = paging
        }
        // Live: every change to the caller's items of this view (entering, changing in, or leaving the list).
        let liveQuery = EncodedQuery.where(view == "opened" ? "opened_by" : "assigned_to", .equals, "javascript:gs.getUserID()")
        values["live"] = ["table": liveTable, "query": liveQuery.description]
        return pages.page("work", values, context: context)
    }

    /// Matching records per concrete type.
    private func counts(in table: SchemaCatalog.Table, query: EncodedQuery, caller: Caller) async throws -> [(table: String, count: Int)] {
        var unordered = query
        unordered.orderBy = []
        guard table.isInHierarchy else {
            let page = try await store.list(RecordQuery(table: table.name, query: unordered, fields: ["sys_id"], limit: 0, count: true), caller: caller)
            return [(table.name, page.total ?? 0)]
        }
        let groups = try await store.aggregate(
            AggregateRequest(table: table.name, query: unordered, count: true, groupBy: ["sys_class_name"]), caller: caller
        )
        return groups.map { ($0.values.first ?? table.name, $0.count ?? 0) }.sorted { $0.table < $1.table }
    }

    /// "5 min", "3 h", "12 d": how long ago a stored UTC time was.
    static func age(since stored: String, now: Date = Date()) -> String {
        guard let date = GlideDateTime.parse(stored) else { return "" }
        let seconds = max(0, Int(now.timeIntervalSince(date)))
        switch seconds {
        case ..<60: return "just now"
        case ..<3600: return "\(seconds / 60) min"
        case ..<86_400: return "\(seconds / 3600) h"
        case ..<(86_400 * 60): return "\(seconds / 86_400) d"
        case ..<(86_400 * 730): return "\(seconds / (86_400 * 30)) mo"
        default: return "\(seconds / (86_400 * 365)) y"
        }
    }

    /// `GET /app/lookup/TABLE?q=TEXT`: type-ahead suggestions as JSON `[{"value": sys_id, "label": text}]`.
    @Sendable func lookup(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let text = (WebForm.decode(request.uri.query ?? "")["q"] ?? "").trimmingCharacters(in: .whitespaces)
        let tableName = context.parameters.get("table") ?? ""
        guard store.catalog.table(tableName) != nil else { throw WebError(.notFound, "There is no table \(tableName.prefix(80)).") }
        let matches = text.isEmpty ? [] : try await store.lookup(text, in: tableName, caller: caller)
        let body = JSONValue.array(matches.map { JSONValue(members: [("value", .string($0.sysID)), ("label", .string($0.label))]) })
        var response = Response.json(body)
        response.headers[.cacheControl] = "no-store"
        return response
    }
}
