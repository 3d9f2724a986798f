import DocketModel
import Foundation
import Synchronization

/// The live queries followed right now, one entry per judgement key (``RecordStore/judgementKey(for:)``) with how
/// many followers share it: the first follower to ask how an event concerns it has the event judged for the
/// others in the same statement (``RecordStore/judgeTogether(_:keys:lives:)``). Followers who see differently
/// (users who each see only their own tasks, scopes, roles) then cost one statement per event for up to
/// ``batch`` of them, not two statements each.
final class LiveRegistry: Sendable {
    /// Viewers judged in one statement at most.
    static let batch = 64

    private let entries = Mutex<[String: (live: LiveQuery, count: Int)]>([:])

    fileprivate func add(_ key: String, _ live: LiveQuery) {
        entries.withLock { entries in
            if let entry = entries[key] {
                entries[key] = (entry.live, entry.count + 1)
            } else {
                entries[key] = (live, 1)
            }
        }
    }

    fileprivate func remove(_ key: String) {
        entries.withLock { entries in
            guard let entry = entries[key] else { return }
            entries[key] = entry.count > 1 ? (entry.live, entry.count - 1) : nil
        }
    }

    /// Up to `limit` judgement keys of `sequence` for followed queries that an event of `eventClass` may concern,
    /// among those `wanted` accepts (those nobody judged yet).
    func keys(
        for sequence: Int, concerning eventClass: SchemaCatalog.Table, limit: Int, where wanted: (LiveJudgementKey) -> Bool
    ) -> [LiveJudgementKey] {
        entries.withLock { entries in
            var found: [LiveJudgementKey] = []
            for (key, entry) in entries {
                if let table = entry.live.table, !eventClass.ancestry.contains(table.name) { continue }
                let candidate = LiveJudgementKey(sequence: sequence, live: key)
                guard wanted(candidate) else { continue }
                found.append(candidate)
                if found.count >= limit { break }
            }
            return found
        }
    }

    /// The live queries of judgement keys (those still followed).
    func lives(for keys: [String]) -> [String: LiveQuery] {
        entries.withLock { entries in
            var lives: [String: LiveQuery] = [:]
            for key in keys { lives[key] = entries[key]?.live }
            return lives
        }
    }

    var count: Int { entries.withLock { $0.count } }
}

/// One follower's place in the registry: follows its live query (whose caller may change), and leaves with it.
final class LiveRegistration: Sendable {
    private let registry: LiveRegistry
    private let key = Mutex<String?>(nil)

    init(_ registry: LiveRegistry) { self.registry = registry }

    /// The follower judges as `live` now, under `judgementKey`.
    func follow(_ live: LiveQuery, judgementKey: String) {
        let previous = key.withLock { key -> String?? in
            guard key != judgementKey else { return .none }
            defer { key = judgementKey }
            return .some(key)
        }
        guard case .some(let old) = previous else { return }
        registry.add(judgementKey, live)
        if let old { registry.remove(old) }
    }

    deinit {
        if let key = key.withLock({ $0 }) { registry.remove(key) }
    }
}

extension RecordStore {
    /// How an event concerns each of `keys` (their live queries in `lives`): whether the row before and the row
    /// after the change match. One statement judges them all (both rows as common table expressions, one
    /// counting subquery per viewer and row), with the same compiler and access rules as one at a time; a viewer
    /// whose query does not compile gets its own error.
    func judgeTogether(
        _ event: ChangeEvent, keys: [LiveJudgementKey], lives: [String: LiveQuery]
    ) async throws -> [LiveJudgementKey: Result<(Bool, Bool), any Error>] {
        var verdicts: [LiveJudgementKey: Result<(Bool, Bool), any Error>] = [:]
        guard let eventClass = catalog.table(event.table), catalog.table(eventClass.root) != nil else {
            for key in keys { verdicts[key] = .success((false, false)) }
            return verdicts
        }
        let (before, after) = (event.rowBefore, event.rowAfter)
        let rows = [("docket_before", before), ("docket_after", after)].filter { !$0.1.isEmpty }
        var columns: [SQLFragment] = []
        // The rows carry only the columns some view's conditions or joins name: the statement stays small to parse.
        var referenced: Set<String> = ["sys_class_name"]
        var judged: [(key: LiveJudgementKey, first: Int)] = []
        for key in keys {
            guard let live = lives[key.live] else {
                verdicts[key] = .failure(SharedWorkUnanswered())
                continue
            }
            if let table = live.table, !eventClass.ancestry.contains(table.name) {
                verdicts[key] = .success((false, false))
                continue
            }
            let found: CompiledView?
            do {
                found = try compiledView(eventClass, for: live, key: key.live)
            } catch {
                verdicts[key] = .failure(error)
                continue
            }
            guard let view = found else {
                verdicts[key] = .success((!before.isEmpty, !after.isEmpty))
                continue
            }
            judged.append((key, columns.count))
            referenced.formUnion(view.identifiers)
            for (name, _) in rows {
                columns.append(
                    "(SELECT COUNT(*) FROM " + (name == "docket_before" ? view.fromBefore : view.fromAfter) + " WHERE "
                        + view.condition + ") AS " + .identifier("j\(columns.count)")
                )
            }
        }
        guard !judged.isEmpty else { return verdicts }
        let with = rows.map { name, row in SQLFragment.identifier(name) + " AS (" + inlineSelect(row, of: eventClass, sysID: event.sysID, only: referenced) + ")" }
        let statement = "WITH " + with.joined(", ") + " SELECT " + columns.joined(", ")
        let result: ResultRow?
        do {
            result = try await storage.read { db in try await db.rows(statement) }.first
        } catch where judged.count > 1 && StorageUnavailable.classify(error) == nil && !(error is CancellationError) {
            // One view's conditions failed the statement (the database answers): each is judged on its own, so
            // that only that one gets the error.
            for (key, _) in judged {
                do {
                    verdicts[key] = try await judgeTogether(event, keys: [key], lives: lives)[key] ?? .failure(SharedWorkUnanswered())
                } catch {
                    verdicts[key] = .failure(error)
                }
            }
            return verdicts
        }
        func matched(_ column: Int) throws -> Bool {
            (try result?.value(at: "j\(column)", kind: .integer).intValue ?? 0) > 0
        }
        for (key, first) in judged {
            var column = first
            var verdict = (false, false)
            if !before.isEmpty {
                verdict.0 = try matched(column)
                column += 1
            }
            if !after.isEmpty { verdict.1 = try matched(column) }
            verdicts[key] = .success(verdict)
        }
        return verdicts
    }
}

/// One view's judging SQL for rows of one class (see ``RecordStore/compiledView(_:for:key:)``).
struct CompiledView: Sendable {
    /// `FROM` over each row's common table expression, with the joins the conditions need.
    let fromBefore: SQLFragment
    let fromAfter: SQLFragment
    let condition: SQLFragment
    /// The names the SQL quotes (the columns the rows must carry among them).
    let identifiers: Set<String>
}

/// Views compiled for judging, kept while they do not depend on the time of day.
final class CompiledViews: Sendable {
    struct Key: Hashable, Sendable {
        let live: String
        let eventClass: String
        let generation: Int
    }

    static let capacity = 4_096
    private let entries = Mutex<[Key: CompiledView?]>([:])

    func view(_ key: Key) -> CompiledView?? { entries.withLock { $0[key] } }

    func keep(_ view: CompiledView?, for key: Key) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = view
        }
    }
}

extension RecordStore {
    /// The judging SQL of `live` (judgement key `key`) for rows of `eventClass`; nil when every row matches. Compiled
    /// once and kept when it reads the same compiled for another day (queries with relative dates, such as
    /// "opened today", are compiled again for each event, against the current time).
    func compiledView(_ eventClass: SchemaCatalog.Table, for live: LiveQuery, key: String) throws -> CompiledView? {
        let cacheKey = CompiledViews.Key(live: key, eventClass: eventClass.name, generation: versionedCatalog.generation)
        if let kept = compiledViews.view(cacheKey) { return kept }
        let now = Date()
        let view = try Self.view(try liveConditions(eventClass, for: live, now: now))
        let later = try Self.view(try liveConditions(eventClass, for: live, now: now.addingTimeInterval(400 * 86_400)))
        if view?.text == later?.text { compiledViews.keep(view?.view, for: cacheKey) }
        return view?.view
    }

    private static func view(_ found: (QueryCompiler, [SQLFragment])?) throws -> (view: CompiledView, text: String)? {
        guard let (compiler, conditions) = found else { return nil }
        var before = compiler
        before.source = .identifier("docket_before")
        var after = compiler
        after.source = .identifier("docket_after")
        let condition = conditions.joined(" AND ")
        let view = CompiledView(
            fromBefore: before.from, fromAfter: after.from, condition: condition,
            identifiers: after.from.identifiers.union(condition.identifiers)
        )
        return (view, after.from.keyText + "\u{0}" + condition.keyText)
    }
}

