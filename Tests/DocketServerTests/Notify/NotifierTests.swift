import DocketModel
import Foundation
import Logging
import Synchronization
import Testing

@testable import DocketServer

/// A push channel that records what it is asked to send, and answers as told (delivered unless told otherwise).
final class RecordingChannel: PushChannel {
    let received = Mutex<[(PushMessage, PushTarget)]>([])
    let outcomes = Mutex<[PushOutcome]>([])

    func send(_ message: PushMessage, to target: PushTarget) async -> PushOutcome {
        received.withLock { $0.append((message, target)) }
        return outcomes.withLock { $0.isEmpty ? .delivered : $0.removeFirst() }
    }

    var count: Int { received.withLock { $0.count } }
}

/// Polls until `condition` holds (at most `seconds`, far above what any of its waits takes on a loaded machine);
/// records an issue naming `what` when it never does.
func eventually(_ what: String, seconds: Double = 60, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("never: \(what)")
}

/// The notifier end to end on an engine: rules → messages and deliveries in one transaction → a channel; restarts,
/// a second instance, a push service that says gone or later, and retention that waits for the notifier.
@Suite("Notifier")
struct NotifierTests {
    static func notifier(_ store: RecordStore, _ channel: RecordingChannel, lease: Duration = .seconds(60)) -> Notifier {
        let logger = Logger(label: "test")
        return Notifier(
            store: store, rules: NotificationRules(store: store),
            dispatcher: PushDispatcher(store: store, channels: ["webpush": channel, "unifiedpush": channel], logger: logger),
            leaseDuration: lease, callers: { try await UserDirectory(store: store).caller(userID: $0) }, logger: logger
        )
    }

    static func device(_ store: RecordStore, _ caller: Caller, _ name: String) async throws -> String {
        try await store.insert(into: "sys_push_subscription", values: [
            "kind": "webpush", "endpoint": "https://push.example/\(name)", "p256dh": "key", "auth": "secret", "name": name,
        ], caller: caller)
    }

    static func rows(_ store: RecordStore, _ sql: SQLFragment) async throws -> [ResultRow] {
        try await store.storage.read { db in try await db.rows(sql) }
    }

    static func started(_ store: RecordStore) async throws -> Bool {
        try await store.storage.read { db in try await NotifierLease.position(db) } != nil
    }

    @Test("a change reaches john's devices: the message in his inbox, one delivery per device, sent; a restart sends nothing again", .timeLimit(.minutes(1)))
    func deliversOnce() async throws {
        try await TestApp.withStore { store in
            let laptop = try await Self.device(store, Callers.john, "laptop")
            let phone = try await Self.device(store, Callers.john, "phone")
            _ = try await Self.device(store, Callers.beth, "beth")
            let channel = RecordingChannel()
            let first = Self.notifier(store, channel)
            let running = Task { await first.run() }
            try await eventually("the notifier started") { try await Self.started(store) }
            let id = try await store.insert(
                into: "incident", values: ["short_description": "Printer on fire", "assigned_to": Callers.john.userID], caller: Callers.beth
            )
            try await eventually("both of john's devices were sent the message") { channel.count == 2 }
            let sent = channel.received.withLock { $0 }
            #expect(Set(sent.map(\.1.subscription)) == [laptop, phone])
            #expect(sent.allSatisfy { $0.0.document == id && $0.0.table == "incident" && $0.0.subject.hasSuffix("was assigned to you") })
            let inbox = try await store.list(
                RecordQuery(table: "sys_notification", query: try EncodedQuery("document=\(id)"), count: true), caller: Callers.john
            )
            #expect(inbox.records.count == 1)
            #expect(inbox.records.first?["read"] == "false")
            #expect(inbox.records.first?.sysID == sent.first?.0.notification)
            try await eventually("the deliveries were recorded as sent") {
                try await Self.rows(store, "SELECT state FROM docket_push_delivery WHERE state = 'sent'").count == 2
            }
            running.cancel()
            await running.value
            // Another notifier (a restart) goes on from the stored position: nothing is sent again.
            let second = Self.notifier(store, channel)
            let again = Task { await second.run() }
            try await store.update(id, in: "incident", values: ["short_description": "Printer fine"], caller: Callers.john)
            // A change after it that tells beth shows the second notifier got that far.
            _ = try await store.insert(
                into: "incident", values: ["short_description": "For Beth", "assigned_to": Callers.beth.userID], caller: Callers.john
            )
            try await eventually("the second notifier told beth") { channel.count >= 3 }
            try await Task.sleep(for: .milliseconds(200))
            #expect(channel.count == 3)
            #expect(channel.received.withLock { $0.last?.0.subject.hasSuffix("was assigned to you") } == true)
            again.cancel()
            await again.value
        }
    }

    @Test("preferences: a rule john turned off tells him nothing; a rule he turned off on one device skips only that device", .timeLimit(.minutes(1)))
    func preferences() async throws {
        try await TestApp.withStore { store in
            let laptop = try await Self.device(store, Callers.john, "laptop")
            let phone = try await Self.device(store, Callers.john, "phone")
            try await store.insert(into: "sys_notification_preference", values: [
                "notification": DemoNotifications.ruleID("comment"), "enabled": "false",
            ], caller: Callers.john)
            try await store.insert(into: "sys_notification_preference", values: [
                "notification": DemoNotifications.ruleID("assigned"), "subscription": phone, "enabled": "false",
            ], caller: Callers.john)
            let channel = RecordingChannel()
            let running = Task { await Self.notifier(store, channel).run() }
            try await eventually("the notifier started") { try await Self.started(store) }
            let id = try await store.insert(
                into: "incident", values: ["short_description": "Muted on the phone", "assigned_to": Callers.john.userID], caller: Callers.beth
            )
            try await eventually("the laptop was told") { channel.count == 1 }
            #expect(channel.received.withLock { $0.map(\.1.subscription) } == [laptop])
            try await store.update(id, in: "incident", values: ["comments": "A comment he does not want to hear of"], caller: Callers.beth)
            // The comment rule is off; the lighter "changed" rule does not stand in for it (only the heaviest counts).
            try await store.update(id, in: "incident", values: ["short_description": "Still assigned"], caller: Callers.beth)
            try await eventually("the change was told to both devices") { channel.count == 3 }
            try await Task.sleep(for: .milliseconds(300))
            let subjects = channel.received.withLock { $0.map(\.0.subject) }
            #expect(subjects.filter { $0.contains("commented") }.isEmpty, "\(subjects)")
            #expect(subjects.filter { $0.contains("was changed by") }.count == 2, "\(subjects)")
            running.cancel()
            await running.value
        }
    }

    @Test("two instances: one holds the lease and notifies; each notification is delivered once", .timeLimit(.minutes(1)))
    func oneOfTwo() async throws {
        try await TestApp.withStore { store in
            _ = try await Self.device(store, Callers.john, "laptop")
            let (one, two) = (RecordingChannel(), RecordingChannel())
            let first = Task { await Self.notifier(store, one).run() }
            let second = Task { await Self.notifier(store, two).run() }
            try await eventually("a notifier started") { try await Self.started(store) }
            for index in 0..<5 {
                _ = try await store.insert(
                    into: "incident", values: ["short_description": "Item \(index)", "assigned_to": Callers.john.userID], caller: Callers.beth
                )
            }
            try await eventually("five messages were sent") { one.count + two.count == 5 }
            try await Task.sleep(for: .milliseconds(300))
            #expect(one.count + two.count == 5)
            #expect(one.count == 0 || two.count == 0)
            first.cancel()
            second.cancel()
            await first.value
            await second.value
        }
    }

    @Test("a push service that says gone (410) removes the subscription; one that says later (503) is tried again", .timeLimit(.minutes(1)))
    func goneAndRetry() async throws {
        try await TestApp.withStore { store in
            let gone = try await Self.device(store, Callers.john, "gone")
            let channel = RecordingChannel()
            channel.outcomes.withLock { $0 = [.gone(status: 410)] }
            let running = Task { await Self.notifier(store, channel).run() }
            try await eventually("the notifier started") { try await Self.started(store) }
            _ = try await store.insert(
                into: "incident", values: ["short_description": "One", "assigned_to": Callers.john.userID], caller: Callers.beth
            )
            try await eventually("the gone subscription was removed") {
                try await Self.rows(store, "SELECT sys_id FROM sys_push_subscription WHERE sys_id = " + .bind(gone)).isEmpty
            }
            let later = try await Self.device(store, Callers.john, "later")
            channel.outcomes.withLock { $0 = [.retry(status: 503, after: 1)] }
            _ = try await store.insert(
                into: "incident", values: ["short_description": "Two", "assigned_to": Callers.john.userID], caller: Callers.beth
            )
            try await eventually("the delivery was tried again and sent", seconds: 60) {
                try await Self.rows(
                    store, "SELECT attempts FROM docket_push_delivery WHERE state = 'sent' AND subscription = " + .bind(later)
                ).first?.value(at: "attempts", kind: .integer).intValue == 2
            }
            running.cancel()
            await running.value
        }
    }

    @Test("retention keeps what the notifier has not read, and goes past it only when it is too far behind")
    func retentionWaits() async throws {
        try await TestApp.withStore { store in
            let channel = RecordingChannel()
            let running = Task { await Self.notifier(store, channel).run() }
            try await eventually("the notifier started") { try await Self.started(store) }
            running.cancel()
            await running.value
            let position = try await store.storage.read { db in try await NotifierLease.position(db) } ?? 0
            for index in 0..<3 {
                _ = try await store.insert(into: "incident", values: ["short_description": "Unread \(index)"], caller: Callers.john)
            }
            try await store.pruneEventLog(olderThan: Date().addingTimeInterval(3600), keepingAtMost: 0)
            #expect(try await store.events(after: position, limit: 10).count == 3)
            #expect(try await store.eventLogPrunedThrough() <= position)
            try await store.pruneEventLog(olderThan: Date().addingTimeInterval(3600), keepingAtMost: 0, notifierHoldLimit: 1)
            #expect(try await store.events(after: 0, limit: 10).isEmpty)
        }
    }

    @Test("a stop is bounded: a push service that never answers holds the notifier's stop for seconds, not for ever", .timeLimit(.minutes(1)))
    func boundedStop() async throws {
        try await TestApp.withStore { store in
            _ = try await Self.device(store, Callers.john, "laptop")
            let channel = SilentChannel()
            let notifier = Self.notifier(store, RecordingChannel())
            let silent = Notifier(
                store: store, rules: notifier.rules,
                dispatcher: PushDispatcher(store: store, channels: ["webpush": channel], logger: notifier.logger),
                callers: notifier.callers, logger: notifier.logger
            )
            let running = Task { await silent.run() }
            try await eventually("the notifier started") { try await Self.started(store) }
            _ = try await store.insert(
                into: "incident", values: ["short_description": "Printer on fire", "assigned_to": Callers.john.userID], caller: Callers.beth
            )
            try await eventually("the push is in flight") { channel.called.withLock { $0 } }
            // The push service has not answered and will not until the end: the stop ending at all (within the
            // test's time limit) is what shows it is bounded; how long its grace lasts is not this test's to time.
            running.cancel()
            await running.value
            #expect(channel.unanswered > 0, "the stop waited for the push service")
            // The lease was given up: another instance takes over at once, and sends what was in flight again.
            let position = try await Self.rows(store, "SELECT lease_until FROM docket_worker WHERE name = 'notifier'")
            #expect(try position.first?.value(at: "lease_until", kind: .integer).intValue == 0)
            channel.answer()
        }
    }

    @Test("finished(_:within:) says whether a task ended in time, and does not cancel it")
    func boundedWait() async throws {
        let quick = Task { 1 }
        #expect(await finished(quick, within: .seconds(5)))
        let gate = AsyncStream<Void>.makeStream()
        let slow = Task { for await _ in gate.stream {}; return 2 }
        #expect(await finished(slow, within: .milliseconds(100)) == false)
        #expect(slow.isCancelled == false)
        gate.continuation.finish()
        #expect(await slow.value == 2)
    }
}

/// A push service that takes a message and does not answer until `answer()`, cancelled or not (a network that
/// dropped the reply, a client with no timeout).
final class SilentChannel: PushChannel {
    let called = Mutex(false)
    private let waiting = Mutex<[CheckedContinuation<Void, Never>]>([])

    func send(_ message: PushMessage, to target: PushTarget) async -> PushOutcome {
        await withCheckedContinuation { continuation in
            waiting.withLock { $0.append(continuation) }
            called.withLock { $0 = true }
        }
        return .delivered
    }

    /// Sends still waiting for an answer.
    var unanswered: Int { waiting.withLock { $0.count } }

    func answer() {
        for continuation in waiting.withLock({ list in defer { list = [] }; return list }) { continuation.resume() }
    }
}
