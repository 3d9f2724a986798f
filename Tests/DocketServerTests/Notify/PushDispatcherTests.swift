import DocketModel
import Foundation
import Logging
import Synchronization
import Testing

@testable import DocketServer

/// A push service with two hosts: `hang.example` takes every message and never answers (until its send is given
/// up), any other host accepts at once. Records what was delivered, and how many sends the hanging host held at once.
final class TwoHostChannel: PushChannel {
    let delivered = Mutex<[(subscription: String, notification: String)]>([])
    let hanging = Mutex<(now: Int, most: Int, total: Int)>((0, 0, 0))

    func send(_ message: PushMessage, to target: PushTarget) async -> PushOutcome {
        if target.endpoint.contains("hang.example") {
            hanging.withLock { $0.now += 1; $0.most = max($0.most, $0.now); $0.total += 1 }
            defer { hanging.withLock { $0.now -= 1 } }
            do { try await Task.sleep(for: .seconds(120)) } catch {}
            return .retry(status: 0, after: nil)
        }
        delivered.withLock { $0.append((target.subscription, message.notification)) }
        return .delivered
    }

    func deliveries(to subscription: String) -> [String] {
        delivered.withLock { $0.filter { $0.subscription == subscription }.map(\.notification) }
    }
}

/// The dispatcher as a pipeline: it sleeps when there is nothing to do, a hanging endpoint holds its own slots and
/// never the deliveries to others, and nothing is lost or sent twice.
@Suite("Push dispatcher")
struct PushDispatcherTests {
    static func run(_ store: RecordStore, _ dispatcher: PushDispatcher) -> Task<Void, Never> {
        let logger = Logger(label: "test")
        let notifier = Notifier(
            store: store, rules: NotificationRules(store: store), dispatcher: dispatcher,
            callers: { try await UserDirectory(store: store).caller(userID: $0) }, logger: logger
        )
        return Task { await notifier.run() }
    }

    static func device(_ store: RecordStore, _ caller: Caller, _ endpoint: String) async throws -> String {
        try await store.insert(into: "sys_push_subscription", values: [
            "kind": "webpush", "endpoint": endpoint, "p256dh": "key", "auth": "secret", "name": endpoint,
        ], caller: caller)
    }

    static func states(_ store: RecordStore, _ subscription: String) async throws -> [String] {
        try await NotifierTests.rows(store, "SELECT state FROM docket_push_delivery WHERE subscription = " + .bind(subscription)).map {
            try $0.value(at: "state", kind: .text).text ?? ""
        }
    }

    @Test("an idle dispatcher sleeps: after it delivered, it looks at storage at most once in two seconds", .timeLimit(.minutes(1)))
    func idle() async throws {
        try await TestApp.withStore { store in
            let laptop = try await Self.device(store, Callers.john, "https://push.example/laptop")
            let channel = RecordingChannel()
            let dispatcher = PushDispatcher(store: store, channels: ["webpush": channel], logger: Logger(label: "test"))
            let running = Self.run(store, dispatcher)
            try await eventually("the notifier started") { try await NotifierTests.started(store) }
            _ = try await store.insert(
                into: "incident", values: ["short_description": "Printer on fire", "assigned_to": Callers.john.userID], caller: Callers.beth
            )
            try await eventually("the delivery was recorded as sent") { try await Self.states(store, laptop) == ["sent"] }
            try await Task.sleep(for: .milliseconds(300))
            let before = dispatcher.passes
            try await Task.sleep(for: .seconds(2))
            let idlePasses = dispatcher.passes - before
            #expect(idlePasses <= 1, "the dispatcher looked \(idlePasses) times in 2 s of idle")
            running.cancel()
            await running.value
        }
    }

    @Test(
        "a hanging endpoint holds at most its host's slots: every delivery to the healthy device arrives at once and once; the hanging one's stay pending",
        .timeLimit(.minutes(1))
    )
    func hangingHost() async throws {
        try await TestApp.withStore { store in
            let hanging = try await Self.device(store, Callers.john, "https://hang.example/phone")
            let laptop = try await Self.device(store, Callers.john, "https://push.example/laptop")
            let channel = TwoHostChannel()
            // Four senders, two per host: a batch that waited for its slowest member, or a host without a bound,
            // would hold every delivery behind the hanging ones for two minutes.
            let dispatcher = PushDispatcher(
                store: store, channels: ["webpush": channel], width: 4, perHost: 2, sendLimit: .seconds(60), logger: Logger(label: "test")
            )
            let running = Self.run(store, dispatcher)
            try await eventually("the notifier started") { try await NotifierTests.started(store) }
            var incidents: [String] = []
            for index in 0..<12 {
                incidents.append(try await store.insert(
                    into: "incident", values: ["short_description": "Hang \(index)", "assigned_to": Callers.john.userID], caller: Callers.beth
                ))
            }
            // Judged by progress, not the clock: the laptop gets all twelve while the hanging sends are still in flight
            // (they are given up only after 60 s, well past this test's waits).
            try await eventually("the laptop got all twelve while the phone's host hangs", seconds: 30) { channel.deliveries(to: laptop).count >= 12 }
            #expect(channel.hanging.withLock { $0.now } >= 1 && channel.hanging.withLock { $0.total } == channel.hanging.withLock { $0.now })
            // One more, due while sends hang: taken as a slot is free, not after the hanging ones.
            _ = try await store.insert(
                into: "incident", values: ["short_description": "Late", "assigned_to": Callers.john.userID], caller: Callers.beth
            )
            try await eventually("the late one reached the laptop", seconds: 30) { channel.deliveries(to: laptop).count >= 13 }
            #expect(channel.hanging.withLock { $0.total } == channel.hanging.withLock { $0.now }, "a hanging send was given up first")
            try await eventually("the laptop's deliveries were recorded") { try await Self.states(store, laptop).allSatisfy { $0 == "sent" } }
            let laptopDeliveries = channel.deliveries(to: laptop)
            #expect(Set(laptopDeliveries).count == laptopDeliveries.count, "a notification was sent twice")
            #expect(channel.hanging.withLock { $0.most } <= 2)
            // Nothing given up: the hanging host's deliveries wait, pending.
            let phone = try await Self.states(store, hanging)
            #expect(phone.count == 13 && phone.allSatisfy { $0 == "pending" })
            running.cancel()
            await running.value
        }
    }

    @Test("a host that keeps failing is backed off as a whole: after three sends given up, its deliveries wait in storage", .timeLimit(.minutes(1)))
    func backoff() async throws {
        try await TestApp.withStore { store in
            let hanging = try await Self.device(store, Callers.john, "https://hang.example/phone")
            let channel = TwoHostChannel()
            let dispatcher = PushDispatcher(
                store: store, channels: ["webpush": channel], width: 8, perHost: 2, sendLimit: .milliseconds(200), logger: Logger(label: "test")
            )
            let running = Self.run(store, dispatcher)
            try await eventually("the notifier started") { try await NotifierTests.started(store) }
            for index in 0..<10 {
                _ = try await store.insert(
                    into: "incident", values: ["short_description": "Hang \(index)", "assigned_to": Callers.john.userID], caller: Callers.beth
                )
            }
            try await eventually("three sends were given up") { channel.hanging.withLock { $0.total } >= 3 }
            try await Task.sleep(for: .milliseconds(700))
            // Two at a time for 200 ms each, backed off for a second after the third: far fewer than ten sends.
            let total = channel.hanging.withLock { $0.total }
            #expect(total <= 6, "the hanging host was tried \(total) times in under a second")
            try await eventually("every delivery was recorded, none lost") {
                let states = try await Self.states(store, hanging)
                return states.count == 10 && states.allSatisfy { $0 == "pending" }
            }
            running.cancel()
            await running.value
        }
    }

    @Test(
        "a first wave to 1,000 devices, one in ten of them hung, with the default pool: the 900 others all arrive at once (none waits for the hung sends' timeout)",
        .timeLimit(.minutes(2))
    )
    func firstWaveWithHungEndpoints() async throws {
        try await TestApp.withStore { store in
            var healthy: [String] = []
            for index in 0..<1000 {
                if index % 10 == 9 {
                    _ = try await Self.device(store, Callers.john, "https://hang.example/\(index)")
                } else {
                    healthy.append(try await Self.device(store, Callers.john, "https://push.example/\(index)"))
                }
            }
            let channel = TwoHostChannel()
            let dispatcher = PushDispatcher(store: store, channels: ["webpush": channel], sendLimit: .seconds(60), logger: Logger(label: "test"))
            let running = Self.run(store, dispatcher)
            try await eventually("the notifier started") { try await NotifierTests.started(store) }
            _ = try await store.insert(
                into: "incident", values: ["short_description": "Wave", "assigned_to": Callers.john.userID], caller: Callers.beth
            )
            // Every healthy device while the hung sends are still in flight (each holds its slot for 60 s here): none of
            // them waited for a hung send to be given up.
            try await eventually("all 900 healthy devices were sent the message", seconds: 50) { channel.delivered.withLock { $0.count } >= 900 }
            #expect(channel.hanging.withLock { $0.total } == channel.hanging.withLock { $0.now }, "a hanging send was given up first")
            #expect(Set(channel.delivered.withLock { $0.map(\.subscription) }) == Set(healthy))
            #expect(channel.hanging.withLock { $0.most } <= dispatcher.unprovenPerHost)
            running.cancel()
            await running.value
        }
    }

    @Test("value(of:within:) gives a task's value in time, nil after the limit, and nil at once when a cancellable wait is cancelled", .timeLimit(.minutes(1)))
    func boundedValue() async throws {
        #expect(await value(of: Task { 7 }, within: .seconds(5)) == 7)
        let gate = AsyncStream<Void>.makeStream()
        let slow = Task { for await _ in gate.stream {}; return 2 }
        #expect(await value(of: slow, within: .milliseconds(50)) == nil)
        // A wait of an hour: only its cancellation can end it within the test's time limit.
        let waiting = Task { await value(of: slow, within: .seconds(3600), cancellable: true) }
        try await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        #expect(await waiting.value == nil)
        gate.continuation.finish()
        #expect(await slow.value == 2)
    }
}
