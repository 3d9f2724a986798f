import Logging
import PostgresNIO
import Synchronization

/// Named prepared statements for the statements docketd runs again and again: a write's insert, read-back and
/// event, a record's read. Unprepared, PostgreSQL parses and plans every statement on every run and describes its
/// result each time; for a POST of an incident (a wide insert and a wide read-back) that was half the server's
/// work. Driven by pgbench with a POST's own statements on two cores, PostgreSQL ran 783–848 of them a second
/// unprepared and 1,647 prepared (docs/performance.md).
///
/// A text (with the types its values are bound as) gets a slot the second time it is run, up to ``slots`` (512) texts
/// per process, for the life of the process (later ones run unprepared, as before, and a notice says so once); postgres-nio then prepares it on each connection the first time that connection runs it, and
/// keeps it there. postgres-nio names a prepared statement by a type, so each slot is a type of its own
/// (``Slot``). A statement that fails on a connection before it ever ran there is run unprepared on that connection
/// from then on: postgres-nio keeps a failed preparation's error for good, and a preparation can fail for a passing
/// reason (a lock not had in time, a table not there yet).
final class PreparedStatements: Sendable {
    /// How many texts one process prepares at most (each connection prepares those it runs).
    static let slots = 1 << SlotBits.count
    /// How many texts are remembered as seen once (forgotten all together when full).
    static let remembered = 1024
    /// Longer texts are never prepared.
    static let longestText = 16 * 1024

    private struct State {
        var seen: Set<String> = []
        var slotOf: [String: Int] = [:]
        var texts: [String] = []
        var connections: [ObjectIdentifier: OnConnection] = [:]
        var full = false
        /// The result's column names of each slot that returned rows: a function of its text (docketd names the
        /// columns it selects and returns), kept so that each run need not index them anew.
        var columns: [Int: PostgresColumns] = [:]
    }

    /// What became of the slots a connection ran: prepared there, or failed before they were (run unprepared there).
    private struct OnConnection {
        weak var connection: PostgresConnection?
        var prepared: Set<Int> = []
        var failed: Set<Int> = []
    }

    private let state = Mutex(State())

    static let shared = PreparedStatements()

    /// A slot to run a text by on one connection, and whether that connection has prepared it already.
    struct Use {
        let slot: Int
        let prepared: Bool
        /// The slot's result columns, when a run returned rows before.
        var columns: PostgresColumns? = nil
    }

    /// The slot of `text` bound with values of `signature` (one letter per value) on `connection`, if it is to run
    /// prepared there.
    func slot(for text: String, signature: String, on connection: PostgresConnection, logger: Logger) -> Use? {
        guard text.utf8.count <= Self.longestText else { return nil }
        let key = signature + "\u{0}" + text
        return state.withLock { state -> Use? in
            if let slot = state.slotOf[key] {
                let known = Self.entry(for: connection, in: &state)
                if known.failed.contains(slot) { return nil }
                return Use(slot: slot, prepared: known.prepared.contains(slot), columns: state.columns[slot])
            }
            if state.seen.contains(key) {
                guard state.texts.count < Self.slots else {
                    if !state.full {
                        state.full = true
                        logger.notice("All prepared-statement slots are taken: statements new from now on are parsed on each run", metadata: ["slots": "\(Self.slots)"])
                    }
                    return nil
                }
                state.texts.append(text)
                state.slotOf[key] = state.texts.count - 1
                return Use(slot: state.texts.count - 1, prepared: false)
            }
            if state.seen.count >= Self.remembered { state.seen.removeAll(keepingCapacity: true) }
            state.seen.insert(key)
            return nil
        }
    }

    /// What `connection` did with its slots so far; a connection freed may have left its address to this one, and
    /// what it did does not carry over.
    private static func entry(for connection: PostgresConnection, in state: inout State) -> OnConnection {
        let key = ObjectIdentifier(connection)
        if let entry = state.connections[key], entry.connection === connection { return entry }
        if state.connections.count > 64 { state.connections = state.connections.filter { $0.value.connection != nil } }
        let entry = OnConnection(connection: connection)
        state.connections[key] = entry
        return entry
    }

    /// Keeps `columns` as the result columns of `slot` (``Use/columns``).
    func remember(_ columns: PostgresColumns, of slot: Int) {
        state.withLock { $0.columns[slot] = columns }
    }

    /// Whether a text seen again now would still get a slot.
    var hasRoom: Bool { state.withLock { $0.texts.count < Self.slots } }

    /// The text of `slot`.
    func text(of slot: Int) -> String {
        state.withLock { $0.texts[slot] }
    }

    /// How a run of `use` on `connection` ended. A slot that ran there is prepared there: a later error is the
    /// statement's own (a constraint, a division by zero) and changes nothing. A slot that failed before it ran may
    /// have failed its preparation, which postgres-nio keeps: it runs unprepared there from now on.
    func ran(_ use: Use, on connection: PostgresConnection, error: (any Error)?, logger: Logger) {
        guard !use.prepared else { return }
        if let error {
            logger.notice(
                "A statement could not be prepared; it is parsed on each run on its connection from now on",
                metadata: ["slot": "\(use.slot)", "error": "\(PostgresStorage.describe(error))"]
            )
        }
        state.withLock { state in
            _ = Self.entry(for: connection, in: &state)
            if error == nil {
                state.connections[ObjectIdentifier(connection)]?.prepared.insert(use.slot)
            } else {
                state.connections[ObjectIdentifier(connection)]?.failed.insert(use.slot)
            }
        }
    }

    /// Runs the statement of `slot` on `connection`, prepared there on its first run.
    func run(
        slot: Int, bindings: PostgresBindings, on connection: PostgresConnection, logger: Logger
    ) async throws -> AsyncThrowingMapSequence<PostgresRowSequence, PostgresRow> {
        try await Self.run(Root.self, bit: SlotBits.count, slot: slot, bindings: bindings, on: connection, logger: logger)
    }

    /// Picks the slot's type one bit at a time, then runs it.
    private static func run<Prefix: SlotIndex>(
        _: Prefix.Type, bit: Int, slot: Int, bindings: PostgresBindings, on connection: PostgresConnection, logger: Logger
    ) async throws -> AsyncThrowingMapSequence<PostgresRowSequence, PostgresRow> {
        if bit == 0 {
            return try await connection.execute(Slot<Prefix>(bindings: bindings), logger: logger)
        }
        if (slot >> (bit - 1)) & 1 == 1 {
            return try await run(One<Prefix>.self, bit: bit - 1, slot: slot, bindings: bindings, on: connection, logger: logger)
        }
        return try await run(Zero<Prefix>.self, bit: bit - 1, slot: slot, bindings: bindings, on: connection, logger: logger)
    }
}

private enum SlotBits {
    static let count = 9
}

/// A slot's number, spelled as a type, its lowest bit outermost: `Zero<One<Root>>` is slot 2.
protocol SlotIndex {
    static var index: Int { get }
}

enum Root: SlotIndex {
    static var index: Int { 0 }
}

enum Zero<Prefix: SlotIndex>: SlotIndex {
    static var index: Int { Prefix.index * 2 }
}

enum One<Prefix: SlotIndex>: SlotIndex {
    static var index: Int { Prefix.index * 2 + 1 }
}

/// The statement of one slot: postgres-nio prepares it under the slot's name the first time a connection runs it.
struct Slot<Index: SlotIndex>: PostgresPreparedStatement {
    static var name: String { "docket_\(Index.index)" }
    static var sql: String { PreparedStatements.shared.text(of: Index.index) }
    typealias Row = PostgresRow

    let bindings: PostgresBindings

    func makeBindings() -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}
