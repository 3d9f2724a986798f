import Crypto
import DocketModel
import Foundation
import Synchronization

/// Who sees alike: one key per caller, derived from what decides what they see, for every grouping of live work
/// (shared judgements of events, shared renderings of results, live groups of sockets).
///
/// The key is not a list of the caller's attributes that someone has to keep complete: it is the caller's read
/// filter of every table as the query compiler builds it (roles, the user's identity where a rule names it,
/// the enterprise and site scope, whatever the compiler reads next), with the time zone the renderer writes dates
/// in and whether the caller is an admin. Two callers with the same key are shown the same rows with the same
/// values: user A and user B of the itil role share one key (their rules grant every task), while two callers who
/// only see their own tasks (a rule with `javascript:gs.getUserID()`) have keys of their own.
final class VisibilityKeys: Sendable {
    private struct Entry: Sendable {
        let generation: Int
        let key: String
    }

    private let cache = Mutex<[Reach: Entry]>([:])
    private let judgements = Mutex<[LiveIdentity: Entry]>([:])
    /// Callers (and live queries) remembered at most; past it the cache starts again (keys are cheap to make again).
    static let capacity = 20_000

    /// A live query as its judgement key depends on it.
    struct LiveIdentity: Hashable, Sendable {
        let caller: CallerIdentity
        let table: String
        let query: String
        let followsInbox: Bool
    }

    /// Everything a caller is made of (``Caller`` field by field), to look a key up.
    struct CallerIdentity: Hashable, Sendable {
        let userID: String
        let userName: String
        let displayName: String
        let roles: [String]
        let timeZoneName: String
        let domains: [String]
        let activeDomain: String?

        init(_ caller: Caller) {
            userID = caller.userID
            userName = caller.userName
            displayName = caller.displayName
            roles = caller.roles.sorted()
            timeZoneName = caller.timeZoneName
            domains = caller.domains.sorted()
            activeDomain = caller.activeDomain
        }
    }

    func key(for caller: Caller, reaching table: String, generation: Int, make: () -> String) -> String {
        Self.remembered(Reach(caller: CallerIdentity(caller), table: table), in: cache, generation: generation, make: make)
    }

    /// A caller as seen through the tables one table reaches.
    struct Reach: Hashable, Sendable {
        let caller: CallerIdentity
        let table: String
    }

    func key(for live: LiveQuery, generation: Int, make: () -> String) -> String {
        let identity = LiveIdentity(
            caller: CallerIdentity(live.caller), table: live.table?.name ?? "", query: live.queryText, followsInbox: live.followsInbox
        )
        return Self.remembered(identity, in: judgements, generation: generation, make: make)
    }

    private static func remembered<Key: Hashable & Sendable>(
        _ identity: Key, in cache: borrowing Mutex<[Key: Entry]>, generation: Int, make: () -> String
    ) -> String {
        if let entry = cache.withLock({ $0[identity] }), entry.generation == generation { return entry.key }
        let key = make()
        cache.withLock { cache in
            if cache.count >= Self.capacity { cache.removeAll(keepingCapacity: true) }
            cache[identity] = Entry(generation: generation, key: key)
        }
        return key
    }
}

extension RecordStore {
    /// The caller's visibility key (see ``VisibilityKeys``) for what a record of `table` shows: equal for two
    /// callers exactly when the read filter of every table it reaches (itself, the tables extending it, and the
    /// tables its references point to, followed on from those) compiles alike for both, and they read dates in the
    /// same time zone. Without a table, every table counts.
    func visibility(of caller: Caller, reaching table: SchemaCatalog.Table?) -> String {
        let (catalog, generation) = versionedCatalog
        return visibilityKeys.key(for: caller, reaching: table?.name ?? "", generation: generation) {
            var text = "admin=\(caller.isAdmin)\u{0}tz=\(caller.timeZoneName)\u{0}"
            let tables = table.map { catalog.reached(from: $0) } ?? catalog.tables
            for table in tables {
                var compiler = QueryCompiler(catalog: catalog, policy: policy, dialect: storage.dialect, caller: caller, table: table)
                do {
                    let filter = try compiler.accessFilter(.read)
                    text += table.name + "=" + (filter?.keyText ?? "*") + "\u{0}"
                } catch {
                    // A rule that does not compile for this caller: nobody else is assumed to see alike.
                    text += table.name + "!" + caller.userID + "\u{0}" + caller.userName + "\u{0}"
                }
            }
            return Self.digest(text)
        }
    }

    /// The key of what a live query judges alike: the caller's visibility, the table, and the query as compiled for
    /// the caller (the same text names another user's tasks for another user: `assigned_to=javascript:gs.getUserID()`).
    func judgementKey(for live: LiveQuery) -> String {
        let (catalog, generation) = versionedCatalog
        return visibilityKeys.key(for: live, generation: generation) { makeJudgementKey(for: live, catalog: catalog) }
    }

    private func makeJudgementKey(for live: LiveQuery, catalog: SchemaCatalog) -> String {
        var text = visibility(of: live.caller, reaching: live.table) + "\u{0}" + (live.table?.name ?? "") + "\u{0}"
        if let table = live.table {
            var compiler = QueryCompiler(catalog: catalog, policy: policy, dialect: storage.dialect, caller: live.caller, table: table)
            do {
                text += (try compiler.condition(for: live.query))?.keyText ?? "*"
            } catch {
                text += "!" + live.queryText + "\u{0}" + live.caller.userID + "\u{0}" + live.caller.userName
            }
        } else if !live.query.isUnfiltered {
            // Without a table the query is judged per event class: alike only for the same user.
            text += live.queryText + "\u{0}" + live.caller.userID + "\u{0}" + live.caller.userName
        }
        if live.followsInbox { text += "\u{0}inbox\u{0}" + live.caller.userID }
        return Self.digest(text)
    }

    static func digest(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}

extension SQLFragment {
    /// The fragment as text with its bound values written in (for keys, never to run).
    var keyText: String {
        pieces.map { piece -> String in
            switch piece {
            case .raw(let text): return text
            case .identifier(let name): return "\"" + name + "\""
            case .bind(let value): return "{\(type(of: value)):\(value)}"
            }
        }.joined()
    }
}

extension SchemaCatalog {
    /// The tables a record of `table` can show or lead to, by name: the table, the tables extending it, and the
    /// targets of their references, followed on from each of those (an incident leads to users, groups, locations,
    /// and from users to departments…).
    func reached(from table: Table) -> [Table] {
        var seen: Set<String> = []
        var frontier = [table.name]
        while let name = frontier.popLast() {
            guard seen.insert(name).inserted, let current = self.table(name) else { continue }
            frontier += current.descendants
            frontier += current.fields.compactMap { $0.type == .reference ? $0.reference : nil }
        }
        return seen.sorted().compactMap { self.table($0) }
    }
}
