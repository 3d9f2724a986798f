import DocketModel
import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization
import InMemoryTracing
import Testing
import Tracing

@testable import DocketServer

/// Subscriptions that follow the head of the log alike ride one group: every member gets each change once, in
/// order; one that cannot keep up, whose caller changed or whose credential ended leaves at exactly the right place.
@Suite("Live groups")
struct LiveGroupsTests {
    /// A member that records what reaches it and can be told to refuse (a full socket, a closed one).
    final class FakeSocket: Sendable {
        let received = Mutex<[Int]>([])
        let answer = Mutex(LiveGroups.Delivery.written)

        func rider(_ caller: Caller, credential: PresentedCredential, after: Int, fixture: Fixture) -> LiveGroups.Rider {
            let loop = fixture.loop
            return LiveGroups.Rider(
                caller: caller, credential: credential, after: after, checkedAt: fixture.credentials.watch().checkedAt, eventLoop: loop
            ) { result in
                precondition(loop.inEventLoop)
                let answer = self.answer.withLock { $0 }
                if answer == .written {
                    self.received.withLock { $0.append(Int(String(decoding: result.payload, as: UTF8.self)) ?? -1) }
                }
                return answer
            }
        }

        var count: Int { received.withLock { $0.count } }
    }

    final class Fixture: Sendable {
        let store: RecordStore
        let authenticator: Authenticator
        let groups: LiveGroups
        let loop: any EventLoop
        var credentials: CredentialCheck { groups.credentials }

        let rides = Mutex<[Task<LiveGroups.Exit, Never>]>([])

        init(store: RecordStore, authenticator: Authenticator, groups: LiveGroups, loop: any EventLoop) {
            (self.store, self.authenticator, self.groups, self.loop) = (store, authenticator, groups, loop)
        }

        /// Rides a group in a task of its own (stopped when the test ends, however it ends).
        func ride(_ subscription: LiveSubscription, _ rider: LiveGroups.Rider) throws -> Task<LiveGroups.Exit, Never> {
            let key = try #require(subscription.groupKey(in: store))
            let ride = Task { await groups.ride(key: key, subscription: subscription, rider: rider) }
            rides.withLock { $0.append(ride) }
            return ride
        }

        /// A subscription to every incident, rendered as the event's sequence.
        func subscription(_ caller: Caller, after: Int) throws -> LiveSubscription {
            var subscription = LiveSubscription(
                live: LiveQuery(table: try store.table("incident"), caller: caller), after: after
            ) { change, _ in Array(String(change.event.sequence).utf8) }
            subscription.shareable = "test"
            return subscription
        }

        func create(_ text: String) async throws -> Int {
            let id = try await store.insert(into: "incident", values: ["short_description": text], caller: Callers.admin)
            return try await store.events(after: 0, limit: 100_000).last { $0.sysID == id }?.sequence ?? -1
        }
    }

    static func withFixture(
        metrics: ServerMetrics? = nil, tracer: (any Tracer)? = nil, _ test: @Sendable (Fixture) async throws -> Void
    ) async throws {
        let threads = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        try await TestApp.withStore { store in
            let (identity, hasher) = TestApp.identity(on: store)
            let groups = LiveGroups(
                store: store, credentials: CredentialCheck(identity: identity), logger: Logger(label: "test"), metrics: metrics,
                tracer: tracer
            )
            let fixture = Fixture(store: store, authenticator: identity.authenticator, groups: groups, loop: threads.next())
            defer {
                for ride in fixture.rides.withLock({ $0 }) { ride.cancel() }
            }
            try await test(fixture)
            for ride in fixture.rides.withLock({ $0 }) {
                ride.cancel()
                _ = await ride.value
            }
            await hasher.shutdown()
        }
        try await threads.shutdownGracefully()
    }

    /// How a ride ended, or `.cancelled` when it had not ended after a minute (the test then fails, not hangs).
    static func exit(of ride: Task<LiveGroups.Exit, Never>) async -> LiveGroups.Exit {
        let timer = Task {
            try? await Task.sleep(for: .seconds(60))
            ride.cancel()
        }
        defer { timer.cancel() }
        return await ride.value
    }

    /// Waits until `members` ride and the group's follower of the log is in place: a tick before it began following
    /// is one it never hears of (its members' credentials were looked at when they joined), so a test that ticks
    /// waits for it.
    static func riding(_ members: Int, fixture: Fixture, followersBefore: Int) async throws {
        try await eventually { fixture.groups.members == members && fixture.store.broadcaster.count > followersBefore }
    }

    static func eventually(_ condition: @Sendable () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(condition())
    }

    @Test("each change's fan-out is timed once for the group and, when traced, is a span of its own", .timeLimit(.minutes(3)))
    func fanoutObserved() async throws {
        let metrics = ServerMetrics()
        let tracer = InMemoryTracer()
        try await Self.withFixture(metrics: metrics, tracer: tracer) { fixture in
            let (caller, token) = try await fixture.authenticator.login(userName: "admin", password: "admin", address: "t")
            let start = try await fixture.store.latestSequence()
            let subscription = try fixture.subscription(caller, after: start)
            let sockets = [FakeSocket(), FakeSocket(), FakeSocket()]
            for socket in sockets {
                _ = try fixture.ride(subscription, socket.rider(caller, credential: .session(token), after: start, fixture: fixture))
            }
            try await Self.eventually { fixture.groups.members == 3 }
            let first = try await fixture.create("one")
            let second = try await fixture.create("two")
            try await Self.eventually { sockets.allSatisfy { $0.count == 2 } }
            let fanouts = tracer.finishedSpans.filter { $0.operationName == "live.fanout" }
            #expect(fanouts.count == 2)
            for (span, sequence) in zip(fanouts.sorted { $0.startInstant.nanosecondsSinceEpoch < $1.startInstant.nanosecondsSinceEpoch }, [first, second]) {
                #expect(span.parentSpanID == nil)
                #expect(span.kind == .producer)
                let attributes = TracingTests.texts(span)
                #expect(attributes["docket.event.sequence"] == String(sequence))
                #expect(attributes["docket.table"] == "incident")
                #expect(attributes["docket.live.members"] == "3")
            }
            let text = String(decoding: await metrics.exposition(), as: UTF8.self)
            #expect(text.contains("docket_live_fanout_seconds_count 2"))
            #expect(text.contains("docket_live_fanout_deliveries_total 6"))
        }
    }

    @Test("members get each change once, in order; a congested one goes on alone from where it stopped", .timeLimit(.minutes(3)))
    func congestion() async throws {
        try await Self.withFixture { fixture in
            let (caller, token) = try await fixture.authenticator.login(userName: "admin", password: "admin", address: "t")
            let start = try await fixture.store.latestSequence()
            let subscription = try fixture.subscription(caller, after: start)
            let (steady, slow) = (FakeSocket(), FakeSocket())
            let rides = try [steady, slow].map { socket in
                try fixture.ride(subscription, socket.rider(caller, credential: .session(token), after: start, fixture: fixture))
            }
            try await Self.eventually { fixture.groups.members == 2 }
            #expect(fixture.groups.count == 1)
            var sequences: [Int] = []
            for index in 0..<3 { sequences.append(try await fixture.create("first \(index)")) }
            try await Self.eventually { steady.count == 3 && slow.count == 3 }
            #expect(steady.received.withLock { $0 } == sequences)
            #expect(slow.received.withLock { $0 } == sequences)

            slow.answer.withLock { $0 = .congested }
            let fourth = try await fixture.create("fourth")
            guard case .alone(let after) = await Self.exit(of: rides[1]) else {
                Issue.record("the congested member should go on alone")
                return
            }
            // Everything up to the third change reached it; the fourth is read again from the log.
            #expect(after >= sequences[2] && after < fourth)
            try await Self.eventually { steady.count == 4 }
            #expect(steady.received.withLock { $0.last } == fourth)

            rides[0].cancel()
            #expect(await Self.exit(of: rides[0]) == .cancelled)
            try await Self.eventually { fixture.groups.count == 0 }
        }
    }

    @Test("a member whose caller changed goes on alone; one whose session ended is revoked", .timeLimit(.minutes(3)))
    func credentials() async throws {
        try await Self.withFixture { fixture in
            let (caller, token) = try await fixture.authenticator.login(userName: "john.doe", password: "password", address: "t")
            let start = try await fixture.store.latestSequence()
            let subscription = try fixture.subscription(caller, after: start)
            let socket = FakeSocket()
            let ride = try fixture.ride(subscription, socket.rider(caller, credential: .session(token), after: start, fixture: fixture))
            try await Self.eventually { fixture.groups.members == 1 }
            let before = try await fixture.create("before the change")
            try await Self.eventually { socket.count == 1 }
            // A new time zone changes how the caller sees dates: the group no longer renders for them.
            _ = try await fixture.store.update(
                caller.userID, in: "sys_user", values: ["time_zone": "Europe/Paris"], caller: Callers.admin
            )
            let created = try await fixture.create("after the change")
            guard case .alone(let after) = await Self.exit(of: ride) else {
                Issue.record("a member whose caller changed should go on alone")
                return
            }
            // It goes on alone from the last change the group gave it: nothing lost, nothing repeated.
            #expect(after >= before && after < created)
            #expect(socket.received.withLock { $0 } == [before])

            let (again, session) = try await fixture.authenticator.login(userName: "john.doe", password: "password", address: "t")
            let later = try fixture.subscription(again, after: try await fixture.store.latestSequence())
            let second = try fixture.ride(later, socket.rider(again, credential: .session(session), after: later.after, fixture: fixture))
            try await Self.eventually { fixture.groups.members == 1 }
            try await fixture.authenticator.endSession(session)
            _ = try await fixture.create("after the logout")
            #expect(await Self.exit(of: second) == .revoked)
            #expect(socket.count == 1)
        }
    }

    @Test("subscribers who see alike ride one group whoever they are; a caller who sees differently (roles, a rule that names the user, time zone) rides another and gets only what it may see", .timeLimit(.minutes(3)))
    func whoRidesTogether() async throws {
        try await Self.withFixture { fixture in
            let store = fixture.store
            // Each change rendered as its sequence (what a member may see is decided by its group's judgement).
            func subscription(_ caller: Caller, after: Int) throws -> LiveSubscription {
                var subscription = LiveSubscription(
                    live: LiveQuery(table: try store.table("incident"), query: try EncodedQuery("short_descriptionSTARTSWITHride"), caller: caller),
                    after: after
                ) { change, caller in Array("\(change.event.sequence)".utf8) }
                subscription.shareable = "test"
                return subscription
            }
            var sessions: [String: (Caller, String)] = [:]
            for name in ["john.doe", "beth.anglin", "abel.tuter"] {
                sessions[name] = try await fixture.authenticator.login(userName: name, password: "password", address: "t")
            }
            // beth reads dates in Los Angeles time; abel has no itil role (he sees the tasks he is involved in).
            let start = try await store.latestSequence()
            var riders: [String: FakeSocket] = [:]
            for name in ["john.doe", "beth.anglin", "abel.tuter"] {
                let (caller, token) = try #require(sessions[name])
                let socket = FakeSocket()
                riders[name] = socket
                _ = try fixture.ride(subscription(caller, after: start), socket.rider(caller, credential: .session(token), after: start, fixture: fixture))
            }
            // Another user with john's roles and time zone would ride john's group.
            var other = try #require(sessions["john.doe"]).0
            other.userID = DemoData.userID("bud.richman")
            other.userName = "bud.richman"
            #expect(try subscription(other, after: start).groupKey(in: store) == subscription(try #require(sessions["john.doe"]).0, after: start).groupKey(in: store))
            try await Self.eventually { fixture.groups.members == 3 }
            // Three groups: beth's time zone and abel's rules differ from john's, and from each other.
            #expect(fixture.groups.count == 3)
            let hidden = try await fixture.create("ride: not abel's")
            let his = try await store.insert(
                into: "incident", values: ["short_description": "ride: abel's", "caller_id": DemoData.userID("abel.tuter")], caller: Callers.admin
            )
            let hisSequence = try await store.events(after: 0, limit: 100_000).last { $0.sysID == his }?.sequence ?? -1
            let (john, beth, abel) = (try #require(riders["john.doe"]), try #require(riders["beth.anglin"]), try #require(riders["abel.tuter"]))
            try await Self.eventually { john.count == 2 && beth.count == 2 && abel.count == 1 }
            #expect(abel.received.withLock { $0 } == [hisSequence])
            #expect(john.received.withLock { $0 } == [hidden, hisSequence])
        }
    }

    @Test("a member that must see every change after its start never joins a group already past it: it follows alone from its start", .timeLimit(.minutes(3)))
    func exactStart() async throws {
        try await Self.withFixture { fixture in
            let (caller, token) = try await fixture.authenticator.login(userName: "admin", password: "admin", address: "t")
            let start = try await fixture.store.latestSequence()
            let subscription = try fixture.subscription(caller, after: start)
            let early = FakeSocket()
            _ = try fixture.ride(subscription, early.rider(caller, credential: .session(token), after: start, fixture: fixture))
            try await Self.eventually { fixture.groups.members == 1 }
            let first = try await fixture.create("handed out before the others join")
            try await Self.eventually { early.count == 1 }

            // One told it starts before `first`: the group cannot give it `first` again, so it follows alone.
            let behind = FakeSocket()
            var late = behind.rider(caller, credential: .session(token), after: start, fixture: fixture)
            late.exact = true
            #expect(await Self.exit(of: try fixture.ride(subscription, late)) == .alone(after: start))
            #expect(behind.count == 0)
            // One that starts where the group is joins it, as does one that is not exact (a socket "from now").
            let (level, lenient) = (FakeSocket(), FakeSocket())
            var joining = level.rider(caller, credential: .session(token), after: first, fixture: fixture)
            joining.exact = true
            _ = try fixture.ride(subscription, joining)
            _ = try fixture.ride(subscription, lenient.rider(caller, credential: .session(token), after: start, fixture: fixture))
            try await Self.eventually { fixture.groups.members == 3 }
            let second = try await fixture.create("handed out to all three")
            try await Self.eventually { level.count == 1 && lenient.count == 1 && early.count == 2 }
            #expect(level.received.withLock { $0 } == [second])
            #expect(early.received.withLock { $0 } == [first, second])
            #expect(fixture.groups.count == 1)

            // A new group starts where its first member starts: an exact member told an earlier start goes alone.
            let other = try fixture.subscription(caller, after: start)
            var otherSubscription = other
            otherSubscription.shareable = "another format"
            let (starter, older) = (FakeSocket(), FakeSocket())
            var starting = starter.rider(caller, credential: .session(token), after: second, fixture: fixture)
            starting.exact = true
            _ = try fixture.ride(otherSubscription, starting)
            try await Self.eventually { fixture.groups.count == 2 }
            var before = older.rider(caller, credential: .session(token), after: first, fixture: fixture)
            before.exact = true
            #expect(await Self.exit(of: try fixture.ride(otherSubscription, before)) == .alone(after: first))
        }
    }

    @Test("at each tick a member with a heartbeat has its credential looked at and gets the heartbeat; one whose session ended is revoked", .timeLimit(.minutes(3)))
    func heartbeats() async throws {
        try await Self.withFixture { fixture in
            let (caller, token) = try await fixture.authenticator.login(userName: "john.doe", password: "password", address: "t")
            // A second session of the same user (from another client: one client keeps one session).
            let (_, other) = try await fixture.authenticator.login(userName: "john.doe", password: "password", address: "t", client: "another")
            #expect(other != token)
            let start = try await fixture.store.latestSequence()
            let subscription = try fixture.subscription(caller, after: start)
            let beats = Mutex([0, 0, 0])
            let followers = fixture.store.broadcaster.count
            var rides: [Task<LiveGroups.Exit, Never>] = []
            for (index, session) in [token, other, token].enumerated() {
                var rider = FakeSocket().rider(caller, credential: .session(session), after: start, fixture: fixture)
                // The third has a clock of its own (a socket): no heartbeat from the group.
                if index < 2 {
                    let loop = fixture.loop
                    rider.beat = {
                        precondition(loop.inEventLoop)
                        beats.withLock { $0[index] += 1 }
                        return .written
                    }
                }
                rides.append(try fixture.ride(subscription, rider))
            }
            try await Self.riding(3, fixture: fixture, followersBefore: followers)
            fixture.store.broadcaster.tick()
            try await Self.eventually { beats.withLock { $0 } == [1, 1, 0] }
            // The second's session ends without any change to the log: the next tick finds it.
            try await fixture.authenticator.endSession(other)
            fixture.store.broadcaster.tick()
            #expect(await Self.exit(of: rides[1]) == .revoked)
            try await Self.eventually { beats.withLock { $0 } == [2, 1, 0] }
            #expect(fixture.groups.members == 2)
        }
    }

    @Test("a member whose bearer token runs out, which no logout or revocation tells, is revoked at the next tick", .timeLimit(.minutes(5)))
    func expiryAtTick() async throws {
        try await Self.withFixture { fixture in
            // A client whose access tokens last a few seconds, and a member riding with one: the first tick must come
            // while the token is good. On a machine too loaded for that (its sign-ins alone took the token's time),
            // the ride is given up and tried again with a token three times as long, so the test waits on its own
            // progress, not on the machine's speed.
            for (attempt, lifespan) in [4, 12, 36, 108].enumerated() {
                try await fixture.store.insert(
                    into: "oauth_entity",
                    values: ["name": "brief\(attempt)", "client_id": "brief\(attempt)", "client_secret": "s", "access_token_lifespan": "\(lifespan)"],
                    caller: Callers.admin
                )
                let form = ["grant_type": "password", "client_id": "brief\(attempt)", "client_secret": "s", "username": "john.doe", "password": "password"]
                let granted = ContinuousClock.now
                let grant = try #require(try await fixture.credentials.identity.grant(form: form, basicClient: nil, address: "t"))
                let (john, _) = try await fixture.authenticator.login(userName: "john.doe", password: "password", address: "t")
                let caller = try #require(try await fixture.credentials.caller(for: .bearer(grant.accessToken), as: john))
                let start = try await fixture.store.latestSequence()
                let beats = Mutex(0)
                var rider = FakeSocket().rider(caller, credential: .bearer(grant.accessToken), after: start, fixture: fixture)
                rider.beat = {
                    beats.withLock { $0 += 1 }
                    return .written
                }
                let followers = fixture.store.broadcaster.count
                let ride = try fixture.ride(try fixture.subscription(caller, after: start), rider)
                try await Self.riding(1, fixture: fixture, followersBefore: followers)
                let generations = fixture.credentials.watch().checkedAt
                fixture.store.broadcaster.tick()
                try await Self.eventually { beats.withLock { $0 } >= 1 }
                guard ContinuousClock.now < granted + .seconds(lifespan - 1) else {
                    ride.cancel()
                    _ = await ride.value
                    try await Self.eventually { fixture.groups.members == 0 }
                    continue
                }
                #expect(beats.withLock { $0 } == 1)
                // Nothing the counters see happens: only the clock moves past the token's expiry.
                try await Task.sleep(until: granted + .seconds(lifespan) + .milliseconds(500))
                fixture.store.broadcaster.tick()
                #expect(await Self.exit(of: ride) == .revoked)
                #expect(beats.withLock { $0 } == 1)
                #expect(fixture.credentials.watch().checkedAt == generations)
                // The group lets the seat go just after the ride has ended.
                try await Self.eventually { fixture.groups.members == 0 }
                return
            }
            Issue.record("the first tick never came while the token was good, even with a 108 s token")
        }
    }

    @Test("a shared result is written as one whole text frame: the header RFC 6455 prescribes for its length, then the text")
    func textFrames() {
        let allocator = ByteBufferAllocator()
        for (length, header) in [
            (5, [0x81, 5]), (125, [0x81, 125]), (126, [0x81, 126, 0, 126]), (65_535, [0x81, 126, 0xFF, 0xFF]),
            (70_000, [0x81, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70]),
        ] as [(Int, [UInt8])] {
            let text = [UInt8](repeating: UInt8(ascii: "x"), count: length)
            let frame = GraphQLSocketConnection.textFrame(text, allocator: allocator)
            #expect(frame.getBytes(at: 0, length: header.count) == header)
            #expect(frame.readableBytes == header.count + length)
            #expect(frame.getBytes(at: header.count, length: length) == text)
        }
    }
}
