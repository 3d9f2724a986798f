import DocketModel
import Foundation
import Logging
import ServiceLifecycle

/// The notifier's row in `docket_worker`: where it is in the event log, and which instance holds the lease that
/// makes it the one notifier. Every write that advances the position first checks, in its transaction, that this
/// instance still holds the lease and that the position is the one it started from: an instance that lost the
/// lease (it stalled, another took over) rolls back instead of writing a notification twice.
struct NotifierLease: Sendable {
    struct Lost: Error {}

    let storage: any Storage
    /// This instance (a random id per process).
    let holder: String
    /// How long a lease lasts without renewal, in milliseconds.
    let duration: Int
    let name = "notifier"

    static func now() -> Int { Int(Date().timeIntervalSince1970 * 1000) }

    /// Takes the lease when nobody holds it (or its holder let it lapse), or renews this instance's; returns the
    /// position to continue from, or nil when another instance holds it. The first notifier of a database starts
    /// at the end of the log: changes made before it existed are nobody's news.
    func acquire() async throws -> Int? {
        let now = Self.now()
        return try await storage.write { db -> Int? in
            if let row = try await db.rows(
                "SELECT position, holder, lease_until FROM docket_worker WHERE name = " + .bind(name)
            ).first {
                let current = try row.value(at: "holder", kind: .text).text ?? ""
                let until = Int(try row.value(at: "lease_until", kind: .integer).intValue ?? 0)
                guard current == holder || until < now else { return nil }
                try await db.run(
                    "UPDATE docket_worker SET holder = " + .bind(holder) + ", lease_until = " + .bind(now + duration)
                        + " WHERE name = " + .bind(name)
                )
                return Int(try row.value(at: "position", kind: .integer).intValue ?? 0)
            }
            // Where nothing below is still in flight: a change committing later is news.
            let latest = try await db.integer(SQLFragment(db.dialect.settledEventSequenceSQL))
            try await db.run(
                "INSERT INTO docket_worker (name, position, holder, lease_until) VALUES (" + .bind(name) + ", " + .bind(latest)
                    + ", " + .bind(holder) + ", " + .bind(now + duration) + ")"
            )
            return latest
        }
    }

    /// In a write transaction: checks that this instance holds the lease at `from`, then moves to `to` and renews.
    func advance(from: Int, to: Int, db: SQLExecutor) async throws {
        guard let row = try await db.rows("SELECT position, holder FROM docket_worker WHERE name = " + .bind(name)).first,
            try row.value(at: "holder", kind: .text).text == holder,
            Int(try row.value(at: "position", kind: .integer).intValue ?? -1) == from
        else { throw Lost() }
        try await db.run(
            "UPDATE docket_worker SET position = " + .bind(to) + ", lease_until = " + .bind(Self.now() + duration) + " WHERE name = "
                + .bind(name)
        )
    }

    /// Moves on without writing anything else (events that told nobody, or a jump past pruned events).
    func advance(from: Int, to: Int) async throws {
        try await storage.write { db in try await advance(from: from, to: to, db: db) }
    }

    /// Gives the lease up (at shutdown), so that another instance takes over at once.
    func release() async throws {
        try await storage.write { db in
            try await db.run(
                "UPDATE docket_worker SET lease_until = 0 WHERE name = " + .bind(name) + " AND holder = " + .bind(holder)
            )
        }
    }

    /// The position of the notifier, wherever it runs (nil before the first one ran): retention keeps what it has
    /// not read.
    static func position(_ db: SQLExecutor) async throws -> Int? {
        try await db.rows("SELECT position FROM docket_worker WHERE name = 'notifier'").first?.value(at: "position", kind: .integer).intValue
            .map { Int($0) }
    }
}

/// Follows the event log from its stored position, turns each committed change into notifications
/// (``NotificationRules``), and records them — the messages in `sys_notification`, one delivery per device of each
/// recipient, the new position — in one transaction; then wakes the ``PushDispatcher``. A crash or a restart
/// loses nothing (the position is only moved with what it covered) and writes nothing twice. Where several
/// instances share a database one holds the lease and notifies; the others wait to take over.
final class Notifier: Sendable {
    let store: RecordStore
    let rules: NotificationRules
    let lease: NotifierLease
    let dispatcher: PushDispatcher
    let callers: @Sendable (String) async throws -> Caller?
    let logger: Logger

    init(
        store: RecordStore, rules: NotificationRules, dispatcher: PushDispatcher, leaseDuration: Duration = .seconds(60),
        callers: @escaping @Sendable (String) async throws -> Caller?, logger: Logger
    ) {
        self.store = store
        self.rules = rules
        self.dispatcher = dispatcher
        self.callers = callers
        self.logger = logger
        self.lease = NotifierLease(
            storage: store.storage, holder: SysID.generate(), duration: Int(leaseDuration.components.seconds) * 1000
        )
    }

    /// Notifies until cancelled: takes the lease (or waits for it), follows the log, and starts over after a failure.
    func run() async {
        while !Task.isCancelled {
            do {
                guard let position = try await lease.acquire() else {
                    await dispatcher.stop()
                    try await Task.sleep(for: .milliseconds(lease.duration / 4))
                    continue
                }
                dispatcher.start()
                try await follow(from: position)
            } catch is CancellationError {
                break
            } catch let error as EventLogError {
                guard case .resyncNeeded(let oldest) = error else { continue }
                // Retention went past the notifier's position (it was held back for as long as allowed): what was
                // pruned cannot be notified any more. Said loudly, then the notifier goes on from what is left.
                logger.error("The notifier fell behind the event log's retention; changes before this point were not notified", metadata: [
                    "resumingAfter": "\(oldest)",
                ])
                await skip(to: oldest)
            } catch is NotifierLease.Lost {
                logger.notice("Another instance took over notifications")
                await dispatcher.stop()
            } catch {
                logger.warning("Notifications paused after an error; retrying", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
        if !(await dispatcher.stop(within: .seconds(5))) {
            logger.warning("Push deliveries in flight did not end within 5 s of shutdown; they are sent again by the next notifier")
        }
        // Given up in a task of its own (this one is cancelled, and a cancelled task's writes do not run), for a
        // few seconds at most: when the database does not answer, the lease lapses by itself.
        let lease = self.lease
        let logger = self.logger
        let release = Task {
            do { try await lease.release() } catch { logger.notice("The notifier's lease lapses by itself", metadata: ["error": "\(error)"]) }
        }
        if !(await finished(release, within: .seconds(3))) {
            logger.notice("The notifier's lease could not be given up within 3 s; it lapses by itself")
        }
    }

    private func skip(to sequence: Int) async {
        do {
            guard let position = try await lease.acquire() else { return }
            try await lease.advance(from: position, to: max(position, sequence))
        } catch {
            logger.warning("The notifier could not move past pruned events", metadata: ["error": "\(error)"])
        }
    }

    private func follow(from start: Int) async throws {
        var committed = start
        var position = start
        var renewed = ContinuousClock.now
        let renewal = Duration.milliseconds(lease.duration / 3)
        var events = store.subscribe(after: start, replayLimited: false, kind: .notifier).makeAsyncIterator()
        while let step = try await events.nextStep() {
            if case .event(let event) = step {
                // A message written elsewhere (the sender API, on any instance) waits for this instance's dispatcher.
                if event.table == "sys_notification", event.operation == .insert { dispatcher.wake() }
                let pending = try await rules.notifications(for: event, callers: callers)
                if pending.isEmpty {
                    position = event.sequence
                } else {
                    let written = try await record(pending, from: committed, to: event.sequence)
                    committed = event.sequence
                    position = committed
                    renewed = .now
                    for inserted in written { store.notify(inserted) }
                    dispatcher.wake()
                }
            }
            // The position moves on with notifications; between them, and to keep the lease, at least every third of it.
            if ContinuousClock.now - renewed >= renewal || (position != committed && step.isTick) {
                try await lease.advance(from: committed, to: position)
                committed = position
                renewed = .now
            }
        }
    }

    /// Writes notifications and their deliveries, and moves the position past their event, in one transaction;
    /// returns the events of the messages written (published after the commit, so users' open pages learn of them).
    private func record(_ pending: [PendingNotification], from: Int, to: Int) async throws -> [ChangeEvent] {
        let store = self.store
        return try await store.storage.write { db -> [ChangeEvent] in
            try await self.lease.advance(from: from, to: to, db: db)
            var events: [ChangeEvent] = []
            for notification in pending {
                events.append(try await Self.write(
                    ["user": notification.userID, "notification": notification.rule, "table_name": notification.event.table,
                     "document": notification.event.sysID, "event": String(notification.event.sequence),
                     "subject": notification.subject, "message": notification.message],
                    to: .devicesOf(notification.userID, except: notification.mutedDevices), store: store, db: db
                ))
            }
            return events
        }
    }

    /// Which devices a message goes to.
    enum Devices {
        /// Every active device of a user, but these.
        case devicesOf(String, except: [String])
        /// These subscriptions (the sender API's choice), if active.
        case subscriptions([String])
    }

    /// Writes one message (`sys_notification`, with its event) and a pending delivery to each of its devices, in the
    /// caller's transaction; returns the event, to publish after the commit. The dispatcher sends what is pending.
    static func write(_ fields: [String: String], to devices: Devices, store: RecordStore, db: SQLExecutor) async throws -> ChangeEvent {
        guard let inbox = store.catalog.table("sys_notification") else { throw EngineError.invalidTable("sys_notification") }
        let now = GlideDateTime.format(Date())
        let millis = NotifierLease.now()
        let sysID = SysID.generate()
        var values = fields.merging([
            "sys_id": sysID, "read": "false", "sys_created_on": now, "sys_created_by": Caller.system.userName, "sys_updated_on": now,
            "sys_updated_by": Caller.system.userName, "sys_mod_count": "0",
        ]) { $1 }
        values = values.filter { !$0.value.isEmpty }
        let stored = inbox.fields.filter { $0.type.isStored && values[$0.name] != nil }
        try await db.run(
            "INSERT INTO " + .identifier(inbox.physicalTable) + " (" + stored.map { SQLFragment.identifier($0.name) }.joined(", ")
                + ") VALUES (" + stored.map { FieldCoercion.sqlValue(values[$0.name]!, for: $0).fragment }.joined(", ") + ")"
        )
        let event = try await store.appendEvent(
            table: inbox, sysID: sysID, operation: .insert, fields: stored.map(\.name), values: values, previous: [:], caller: .system,
            now: now, db: db
        )
        // Bounded lists: the sender API may name any number of devices, and databases bound a statement's parameters.
        var selections: [SQLFragment] = []
        var muted: [String] = []
        switch devices {
        case .devicesOf(let user, let except):
            selections = [.identifier("user") + " = " + .bind(user)]
            muted = except
        case .subscriptions(let ids):
            for start in stride(from: 0, to: ids.count, by: NotificationRules.listChunk) {
                selections.append("sys_id IN (" + .bindList(Array(ids[start..<min(ids.count, start + NotificationRules.listChunk)])) + ")")
            }
        }
        for selection in selections {
            try await db.run(
                "INSERT INTO docket_push_delivery (notification, subscription, user_id, state, attempts, next_attempt, last_status, created)"
                    + " SELECT " + .bind(sysID) + ", sys_id, COALESCE(" + .identifier("user") + ", ''), 'pending', 0, " + .bind(millis) + ", 0, "
                    + .bind(millis) + " FROM sys_push_subscription WHERE active = 1 AND " + selection
            )
        }
        for start in stride(from: 0, to: muted.count, by: NotificationRules.listChunk) {
            let chunk = Array(muted[start..<min(muted.count, start + NotificationRules.listChunk)])
            try await db.run("DELETE FROM docket_push_delivery WHERE notification = " + .bind(sysID) + " AND subscription IN (" + .bindList(chunk) + ")")
        }
        return event
    }
}

extension EventLogFollower.Iterator.Step {
    var isTick: Bool {
        if case .tick = self { return true }
        return false
    }
}

/// Runs the notifier for the application's lifetime.
struct NotifierService: Service {
    let notifier: Notifier

    func run() async throws {
        await cancelWhenGracefulShutdown { await self.notifier.run() }
    }
}
