import DocketModel
import Foundation
import Hummingbird

/// The dashboard: a type of work's open items counted by state, priority and assignment group, and the items opened
/// and resolved each day of the last 30, drawn as server-rendered charts (bars are SVG shapes inside links; the
/// page's style rules colour them, so nothing inline is needed). Every bar and column opens the list it counts.
struct WebDashboard {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let pages: WebPages

    static let days = 30
    static let maxGroups = 10
    /// Records of a month a series reads (their times only) before it counts day by day instead.
    static let readLimit = 20_000

    struct Bar: Sendable {
        var label: String
        var count: Int
        /// 0–100: the bar's length against the longest of its chart.
        var width: String
        var href: String
    }

    struct Day: Sendable {
        var date: String
        var opened: Int
        var resolved: Int
        var openedHref: String
        var resolvedHref: String
        var openedX: Int
        var resolvedX: Int
        var openedY: String
        var resolvedY: String
        var openedHeight: String
        var resolvedHeight: String
        var tick: String?
        var tickX: Int
        /// Stored (templates read stored properties): whether there is a column to draw.
        var hasOpened = false
        var hasResolvedCount = false
    }

    func add(to router: Router<Context>) {
        router.get("/app/dashboard") { request, context in try await dashboard(request, context: context) }
    }

    /// The types of work the caller may read: tables of the task hierarchy with a state.
    func tables(_ caller: Caller) -> [SchemaCatalog.Table] {
        let preferred = ["incident", "problem", "change_request", "defect"]
        let all = store.catalog.tables.filter {
            $0.ancestry.contains("task") && $0.field("state") != nil && $0.field("active") != nil && store.mayRead(in: $0.name, caller: caller)
        }
        return all.sorted { a, b in
            let (i, j) = (preferred.firstIndex(of: a.name) ?? 99, preferred.firstIndex(of: b.name) ?? 99)
            return i != j ? i < j : a.label < b.label
        }
    }

    @Sendable func dashboard(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let readable = tables(caller)
        let asked = WebForm.decode(request.uri.query ?? "")["table"] ?? readable.first?.name ?? ""
        guard let table = readable.first(where: { $0.name == asked }) else {
            throw WebError(.notFound, "There is no dashboard for \(asked.prefix(80)), or you may not see its items.")
        }
        let open = EncodedQuery.where("active", .equals, "true")
        func list(_ query: EncodedQuery) -> String { "/app/list/\(table.name)?q=" + WebLists.escape(query.description) }

        /// Open items counted by a field: a choice field's values in the list's order, any other field's largest
        /// groups first (at most `maxGroups`, and whether there are more).
        func bars(_ fieldName: String) async throws -> (bars: [Bar], more: Bool)? {
            guard let field = table.field(fieldName) else { return nil }
            let choices = store.catalog.choices(for: field.name, in: table) ?? []
            var request = AggregateRequest(table: table.name, query: open, count: true, groupBy: [field.name])
            if choices.isEmpty { request.orderBy = [.init(function: .count, field: "", descending: true)] }
            request.limit = choices.isEmpty ? Self.maxGroups + 1 : 500
            let groups = try await store.aggregate(request, caller: caller).map { (value: $0.values.first ?? "", count: $0.count ?? 0) }
            var ordered = groups
            if !choices.isEmpty {
                let rank = Dictionary(choices.enumerated().map { ($1.value, $0) }, uniquingKeysWith: { a, _ in a })
                ordered.sort { (rank[$0.value] ?? Int.max, $0.value) < (rank[$1.value] ?? Int.max, $1.value) }
            } else {
                ordered.sort { ($0.count, $1.value) > ($1.count, $0.value) }
            }
            let shown = Array(ordered.prefix(Self.maxGroups))
            var names: [String: String] = [:]
            if field.type == .reference, let target = field.reference {
                names = try await store.displayValues([target: Set(shown.map(\.value).filter { !$0.isEmpty })], caller: caller)[target] ?? [:]
            }
            let longest = max(1, shown.map(\.count).max() ?? 1)
            let result = shown.map { value, count in
                let label = value.isEmpty ? "(none)" : choices.first { $0.value == value }?.label ?? names[value] ?? value
                let term = value.isEmpty ? EncodedQuery.where(field.name, .isEmpty) : EncodedQuery.where(field.name, .equals, value)
                return Bar(
                    label: label, count: count, width: String(format: "%.1f", Double(count) * 100 / Double(longest)),
                    href: list(open.and(term))
                )
            }
            return (result, ordered.count > shown.count)
        }

        var values: [String: Any] = [
            "title": "Dashboard", "onDashboard": true, "tableLabel": table.label, "table": table.name,
            "tables": readable.map { ["name": $0.name, "label": $0.label, "current": $0.name == table.name] },
        ]
        let openCount = try await store.list(RecordQuery(table: table.name, query: open, fields: ["sys_id"], limit: 0, count: true), caller: caller).total ?? 0
        values["openCount"] = openCount
        values["openHref"] = list(open)
        for (key, field) in [("byState", "state"), ("byPriority", "priority"), ("byGroup", "assignment_group")] {
            guard let (bars, more) = try await bars(field) else { continue }
            var chart: [String: Any] = ["rows": bars, "label": table.field(field)?.label ?? field]
            if more { chart["more"] = "Only the first \(Self.maxGroups) are shown." }
            if bars.isEmpty { chart["empty"] = true }
            values[key] = chart
        }

        // Opened and resolved per day over the last 30, days as the caller's time zone has them.
        let zone = caller.timeZone ?? .gmt
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let today = calendar.startOfDay(for: Date())
        let resolvedField = ["resolved_at", "closed_at"].first { table.field($0) != nil }
        let utc = TimeZone.gmt
        var starts: [Date] = []
        for back in stride(from: Self.days - 1, through: 0, by: -1) {
            if let start = calendar.date(byAdding: .day, value: -back, to: today) { starts.append(start) }
        }
        guard let first = starts.first, let end = calendar.date(byAdding: .day, value: 1, to: today) else {
            throw WebError(.internalServerError, "The calendar has no last 30 days.")
        }
        func range(_ field: String, _ from: Date, _ to: Date) -> EncodedQuery {
            EncodedQuery.where(field, .greaterOrEqual, GlideDateTime.format(from, in: utc)).and(field, .lessThan, GlideDateTime.format(to, in: utc))
        }
        /// A series' count per day: the times of the month's records read once (one column), put in their days;
        /// where a month holds more than `Self.readLimit` of them, a count per day instead.
        func series(_ field: String) async throws -> [Int] {
            let month = try await store.list(
                RecordQuery(table: table.name, query: range(field, first, end), fields: [field], limit: Self.readLimit, count: true), caller: caller
            )
            if (month.total ?? 0) > month.records.count {
                var counts: [Int] = []
                for start in starts {
                    let next = calendar.date(byAdding: .day, value: 1, to: start) ?? end
                    counts.append(try await store.list(RecordQuery(table: table.name, query: range(field, start, next), fields: ["sys_id"], limit: 0, count: true), caller: caller).total ?? 0)
                }
                return counts
            }
            var counts = [Int](repeating: 0, count: starts.count)
            for record in month.records {
                guard let date = GlideDateTime.parse(record[field]) else { continue }
                let day = calendar.dateComponents([.day], from: first, to: calendar.startOfDay(for: date)).day ?? -1
                if counts.indices.contains(day) { counts[day] += 1 }
            }
            return counts
        }
        let opened = try await series("sys_created_on")
        var resolved: [Int] = []
        if let resolvedField { resolved = try await series(resolvedField) }
        let counts = starts.enumerated().map { index, start in
            let next = calendar.date(byAdding: .day, value: 1, to: start) ?? end
            return (
                date: start, opened: opened[index], resolved: resolved.indices.contains(index) ? resolved[index] : 0,
                openedQuery: range("sys_created_on", start, next), resolvedQuery: resolvedField.map { range($0, start, next) }
            )
        }
        let peak = max(1, counts.map { max($0.opened, $0.resolved) }.max() ?? 1)
        let (left, bottom, height, slot) = (34, 190, 150.0, 19)
        let label = DateFormatter()
        label.timeZone = zone
        label.locale = Locale(identifier: "en_US_POSIX")
        label.dateFormat = "MMM d"
        values["days"] = counts.enumerated().map { index, day -> Day in
            let x = left + index * slot
            func bar(_ value: Int) -> (y: String, height: String) {
                let h = Double(value) / Double(peak) * height
                return (String(format: "%.1f", Double(bottom) - h), String(format: "%.1f", h))
            }
            let (oy, oh) = bar(day.opened)
            let (ry, rh) = bar(day.resolved)
            return Day(
                date: label.string(from: day.date), opened: day.opened, resolved: day.resolved,
                openedHref: list(day.openedQuery), resolvedHref: day.resolvedQuery.map(list) ?? "",
                openedX: x + 2, resolvedX: x + 10, openedY: oy, resolvedY: ry, openedHeight: oh, resolvedHeight: rh,
                tick: index % 7 == 0 || index == counts.count - 1 ? label.string(from: day.date) : nil, tickX: x + 9,
                hasOpened: day.opened > 0, hasResolvedCount: day.resolved > 0
            )
        }
        values["peak"] = peak
        values["peakY"] = bottom - Int(height) + 4
        values["hasResolved"] = resolvedField != nil
        values["resolvedLabel"] = resolvedField.flatMap { table.field($0)?.label } ?? "Resolved"
        values["openedTotal"] = counts.reduce(0) { $0 + $1.opened }
        values["resolvedTotal"] = counts.reduce(0) { $0 + $1.resolved }
        values["zone"] = caller.timeZone?.identifier ?? "UTC"
        return pages.page("dashboard", values, context: context)
    }
}
