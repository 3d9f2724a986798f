import DocketModel
import Foundation
import Synchronization
import Testing

@testable import DocketServer

/// Followers who see differently are judged together, one statement per event (``RecordStore/judgeTogether``):
/// each verdict must be the one a list read gives that viewer.
@Suite("Judging an event for many viewers at once")
struct LiveJudgingTests {
    @Test("verdicts judged together equal those judged one by one and what each viewer's list read shows, on every storage")
    func togetherEqualsAlone() async throws {
        try await TestApp.withStore { store in
            let incident = try store.table("incident")
            let task = try store.table("task")
            var tokyo = Callers.beth
            tokyo.timeZoneName = "Asia/Tokyo"
            let fred = Caller(userID: DemoData.userID("fred.luddy"), userName: "fred.luddy", displayName: "Fred Luddy", roles: [])
            let lives: [LiveQuery] = [
                LiveQuery(table: incident, query: EncodedQuery(), caller: Callers.john),
                LiveQuery(table: incident, query: try EncodedQuery("active=true"), caller: tokyo),
                LiveQuery(table: incident, query: EncodedQuery(), caller: Callers.abel),
                LiveQuery(table: task, query: EncodedQuery(), caller: fred),
                LiveQuery(table: incident, query: try EncodedQuery("assigned_to=javascript:gs.getUserID()"), caller: fred),
                LiveQuery(table: incident, query: try EncodedQuery("caller_id.user_name=abel.tuter^short_descriptionSTARTSWITHWatch"), caller: Callers.john),
                LiveQuery(table: incident, query: try EncodedQuery("priority<=2"), caller: Callers.admin),
                LiveQuery(table: try store.table("problem"), query: EncodedQuery(), caller: Callers.john),
                LiveQuery(table: nil, query: EncodedQuery(), caller: Callers.abel),
            ]
            // What each viewer's list read shows of the record now (the oracle).
            func shown(_ id: String) async throws -> [Bool] {
                var seen: [Bool] = []
                for live in lives {
                    let table = live.table ?? incident
                    let page = try await store.list(
                        RecordQuery(table: table.name, query: live.query.and(.where("sys_id", .equals, id)), fields: ["sys_id"], limit: 1, count: false),
                        caller: live.caller
                    )
                    seen.append(!page.records.isEmpty)
                }
                return seen
            }
            let start = try await store.latestSequence()
            let id = try await store.insert(
                into: "incident", values: ["short_description": "Watched", "caller_id": DemoData.userID("abel.tuter"), "urgency": "3"],
                caller: Callers.john
            )
            var expected: [(Bool, Bool)] = []
            let afterInsert = try await shown(id)
            expected += afterInsert.map { (false, $0) }
            try await store.update(id, in: "incident", values: ["assigned_to": DemoData.userID("fred.luddy"), "urgency": "1", "impact": "1"], caller: Callers.john)
            let afterUpdate = try await shown(id)
            expected += zip(afterInsert, afterUpdate).map { ($0, $1) }
            try await store.update(id, in: "incident", values: ["state": "7"], caller: Callers.john)
            let afterClose = try await shown(id)
            expected += zip(afterUpdate, afterClose).map { ($0, $1) }
            try await store.delete(id, from: "incident", caller: Callers.admin)
            expected += afterClose.map { ($0, false) }
            let events = try await store.events(after: start).filter { $0.sysID == id }
            #expect(events.count == 4)
            // Every viewer sees something and misses something: the comparison is not between constant answers.
            #expect(afterInsert.contains(true) && afterInsert.contains(false))

            var byKey: [String: LiveQuery] = [:]
            for live in lives { byKey[store.judgementKey(for: live)] = live }
            #expect(byKey.count == lives.count, "each viewer judges apart")
            for (index, event) in events.enumerated() {
                let keys = lives.map { LiveJudgementKey(sequence: event.sequence, live: store.judgementKey(for: $0)) }
                let together = try await store.judgeTogether(event, keys: keys, lives: byKey)
                for (position, key) in keys.enumerated() {
                    let want = expected[index * lives.count + position]
                    let both = try #require(together[key]).get()
                    let alone = try #require(try await store.judgeTogether(event, keys: [key], lives: byKey)[key]).get()
                    #expect(both == want, "event \(index), viewer \(position): together \(both), list reads \(want)")
                    #expect(alone == want, "event \(index), viewer \(position): alone \(alone), list reads \(want)")
                }
            }
        }
    }

    @Test("a viewer whose query cannot be judged gets its own error; the others are judged")
    func oneErrorStaysOne() async throws {
        try await TestApp.withStore { store in
            let incident = try store.table("incident")
            let good = LiveQuery(table: incident, query: EncodedQuery(), caller: Callers.abel)
            let long = String(repeating: "x", count: 10_001)
            let bad = LiveQuery(table: incident, query: try EncodedQuery("short_descriptionLIKE" + long), caller: Callers.john)
            let start = try await store.latestSequence()
            _ = try await store.insert(
                into: "incident", values: ["short_description": "Mine", "caller_id": DemoData.userID("abel.tuter")], caller: Callers.john
            )
            let event = try #require(try await store.events(after: start).first)
            let keys = [good, bad].map { LiveJudgementKey(sequence: event.sequence, live: store.judgementKey(for: $0)) }
            let verdicts = try await store.judgeTogether(
                event, keys: keys, lives: [keys[0].live: good, keys[1].live: bad]
            )
            #expect(try #require(verdicts[keys[0]]).get() == (false, true))
            #expect(throws: EngineError.self) { try verdicts[keys[1]]!.get() }
        }
    }

    @Test("a joint statement the database refuses is judged view by view; an unavailable database fails them all")
    func refusedStatement() async throws {
        struct Refused: Error {}
        try await TestApp.withStore { store in
            let incident = try store.table("incident")
            let lives = [
                LiveQuery(table: incident, query: EncodedQuery(), caller: Callers.abel),
                LiveQuery(table: incident, query: try EncodedQuery("active=true"), caller: Callers.john),
                LiveQuery(table: incident, query: try EncodedQuery("urgency=1"), caller: Callers.john),
            ]
            let start = try await store.latestSequence()
            _ = try await store.insert(
                into: "incident", values: ["short_description": "Mine", "caller_id": DemoData.userID("abel.tuter"), "urgency": "3"],
                caller: Callers.john
            )
            let event = try #require(try await store.events(after: start).first)
            var byKey: [String: LiveQuery] = [:]
            for live in lives { byKey[store.judgementKey(for: live)] = live }
            let keys = lives.map { LiveJudgementKey(sequence: event.sequence, live: store.judgementKey(for: $0)) }
            // The joint statement is refused once: each view is then judged on its own.
            store.storage.faults.failNext({ $0.hasPrefix("WITH ") && $0.contains("COUNT(*)") }, with: Refused())
            let verdicts = try await store.judgeTogether(event, keys: keys, lives: byKey)
            #expect(try verdicts[keys[0]]!.get() == (false, true))
            #expect(try verdicts[keys[1]]!.get() == (false, true))
            #expect(try verdicts[keys[2]]!.get() == (false, false))
            // The database cannot be reached: no view is judged, and the caller hears why.
            store.storage.faults.failNext { $0.hasPrefix("WITH ") && $0.contains("COUNT(*)") }
            await #expect(throws: StorageUnavailable.self) { try await store.judgeTogether(event, keys: keys, lives: byKey) }
        }
    }

    @Test("a view's judging SQL is kept when it does not depend on the day, and compiled anew when it does")
    func compiledViewsKept() async throws {
        try await TestApp.withStore { store in
            let incident = try store.table("incident")
            let generation = store.versionedCatalog.generation
            let plain = LiveQuery(table: incident, query: try EncodedQuery("active=true"), caller: Callers.abel)
            let today = LiveQuery(table: incident, query: try EncodedQuery("opened_at>=javascript:gs.beginningOfToday()"), caller: Callers.abel)
            for live in [plain, today] {
                let key = store.judgementKey(for: live)
                let view = try #require(try store.compiledView(incident, for: live, key: key))
                let kept = store.compiledViews.view(CompiledViews.Key(live: key, eventClass: "incident", generation: generation))
                if live.queryText == plain.queryText {
                    #expect(kept??.condition.keyText == view.condition.keyText)
                } else {
                    #expect(kept == nil, "a query relative to today is not kept")
                }
            }
            // Everything matches for an admin with no query: nothing to judge, and that is kept too.
            let all = LiveQuery(table: incident, query: EncodedQuery(), caller: Callers.admin)
            #expect(try store.compiledView(incident, for: all, key: store.judgementKey(for: all)) == nil)
        }
    }

    @Test("followers register while they follow and leave when they stop; a changed caller moves")
    func registry() async throws {
        try await TestApp.withStore { store in
            let incident = try store.table("incident")
            #expect(store.liveRegistry.count == 0)
            var first: LiveChanges.Iterator? = store.subscribe(LiveQuery(table: incident, caller: Callers.john), after: 0).makeAsyncIterator()
            var second: LiveChanges.Iterator? = store.subscribe(LiveQuery(table: incident, caller: Callers.beth), after: 0).makeAsyncIterator()
            let third: LiveChanges.Iterator? = store.subscribe(LiveQuery(table: incident, caller: Callers.abel), after: 0).makeAsyncIterator()
            // john and beth see alike: one entry.
            #expect(store.liveRegistry.count == 2)
            first?.registration.follow(LiveQuery(table: incident, caller: Callers.admin), judgementKey: store.judgementKey(for: LiveQuery(table: incident, caller: Callers.admin)))
            #expect(store.liveRegistry.count == 3)
            // An event judged for one follower is judged for the others in the same go.
            let start = try await store.latestSequence()
            _ = try await store.insert(into: "incident", values: ["short_description": "Together"], caller: Callers.john)
            let event = try #require(try await store.events(after: start).first)
            _ = try await store.change(event, for: LiveQuery(table: incident, caller: Callers.john))
            let abel = LiveJudgementKey(sequence: event.sequence, live: store.judgementKey(for: LiveQuery(table: incident, caller: Callers.abel)))
            let verdict = try await store.judgements.value(abel) {
                Issue.record("abel's view was not judged with john's")
                return (true, true)
            }
            #expect(verdict == (false, false))
            first = nil
            second = nil
            #expect(store.liveRegistry.count == 1)
            _ = (first, second, third)
        }
    }
}

@Suite("Shared work done together")
struct SharedWorkTogetherTests {
    struct Key: SequencedKey {
        let sequence: Int
        let name: String
    }

    @Test("keys nobody computed are computed in one go; one already known is not computed again; an error stays with its key")
    func together() async throws {
        let work = SharedWork<Key, Int>(capacity: 64)
        let calls = Mutex<[[String]]>([])
        #expect(try await work.value(Key(sequence: 1, name: "a")) { 1 } == 1)
        let value = try await work.value(Key(sequence: 1, name: "b")) { isMissing in
            ["a", "c", "d"].map { Key(sequence: 1, name: $0) }.filter(isMissing)
        } compute: { keys in
            calls.withLock { $0.append(keys.map(\.name)) }
            var results: [Key: Result<Int, any Error>] = [:]
            for key in keys { results[key] = key.name == "d" ? .failure(FaultyStorage.outage) : .success(key.name.count * 10) }
            return results
        }
        #expect(value == 10)
        #expect(calls.withLock { $0 } == [["b", "c", "d"]])
        // c was computed with b: asking for it computes nothing.
        #expect(try await work.value(Key(sequence: 1, name: "c")) { 99 } == 10)
        // d's error is d's; asked again, it is computed anew.
        await #expect(throws: StorageUnavailable.self) { try await work.value(Key(sequence: 1, name: "d")) { 5 } }
        #expect(try await work.value(Key(sequence: 1, name: "d")) { 5 } == 5)
        // Later keys are batched with those still missing only.
        _ = try await work.value(Key(sequence: 1, name: "ee")) { isMissing in
            ["b", "c", "fff"].map { Key(sequence: 1, name: $0) }.filter(isMissing)
        } compute: { keys in
            calls.withLock { $0.append(keys.map(\.name)) }
            return Dictionary(uniqueKeysWithValues: keys.map { ($0, .success($0.name.count * 10)) })
        }
        #expect(calls.withLock { $0 }.last == ["ee", "fff"])
        #expect(try await work.value(Key(sequence: 1, name: "fff")) { 0 } == 30)
    }
}
