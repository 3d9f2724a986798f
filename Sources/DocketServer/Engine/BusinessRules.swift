import DocketModel
import Synchronization

/// Business rules as data: the active `sys_script` records that run before an insert, update or delete. A rule
/// applies to its table (`collection`) and the tables that extend it, to the operations it names, and to records
/// matching its `filter_condition` (an encoded query; none matches every record). In `order`, each matching rule
/// sets its field values (`template`, `field=value^field=value`) and, with `abort_action`, refuses the write with
/// its `message`: nothing is written. Scripts (`script`, `condition`) are stored and never run, and rules that run
/// `after`, `async` or on `display` do nothing.
///
/// The rules are cached and the cache follows the event log: any change to `sys_script`, here or on another
/// instance, drops it.
final class BusinessRules: ChangeObserver, Sendable {
    struct Rule: Sendable {
        var sysID: String
        var name: String
        var table: String
        var order: Int
        var operations: Set<AccessOperation>
        /// Nil: every record.
        var condition: EncodedQuery?
        /// Field values the rule sets, in the order written.
        var values: [(field: String, value: String)]
        var aborts: Bool
        /// What the refusal says (the rule's message when it adds one).
        var message: String?
    }

    private let state = Mutex<(generation: Int, rules: [Rule]?)>((0, nil))

    func observe(_ event: ChangeEvent) {
        guard event.table == "sys_script" else { return }
        state.withLock { state in
            state.generation &+= 1
            state.rules = nil
        }
    }

    /// The rules that run before `operation` on records of `table`, in order.
    func rules(for operation: AccessOperation, on table: SchemaCatalog.Table, storage: any Storage) async throws -> [Rule] {
        let all = try await load(storage)
        return all.filter { $0.operations.contains(operation) && table.ancestry.contains($0.table) }
    }

    private func load(_ storage: any Storage) async throws -> [Rule] {
        let (generation, cached) = state.withLock { ($0.generation, $0.rules) }
        if let cached { return cached }
        let rows = try await storage.read { db in
            try await db.rows(
                "SELECT sys_id, name, collection, " + .identifier("order") + ", action_insert, action_update, action_delete,"
                    + " filter_condition, template, abort_action, add_message, message FROM sys_script WHERE active = 1 AND ("
                    + .identifier("when") + " = 'before' OR " + .identifier("when") + " IS NULL OR " + .identifier("when")
                    + " = '')"
            )
        }
        var rules: [Rule] = []
        for row in rows {
            func text(_ name: String) throws -> String { try row.value(at: name, kind: .text).text ?? "" }
            func flag(_ name: String) throws -> Bool { try row.value(at: name, kind: .integer).intValue == 1 }
            var operations = Set<AccessOperation>()
            if try flag("action_insert") { operations.insert(.create) }
            if try flag("action_update") { operations.insert(.write) }
            if try flag("action_delete") { operations.insert(.delete) }
            let name = try text("name")
            let table = try text("collection")
            guard !operations.isEmpty, !table.isEmpty else { continue }
            // A condition that does not parse matches nothing: a rule must never apply more widely than written.
            let filter = try text("filter_condition")
            let condition: EncodedQuery?
            if filter.isEmpty {
                condition = nil
            } else if let parsed = try? EncodedQuery(filter) {
                condition = parsed
            } else {
                continue
            }
            let message = try text("message")
            rules.append(Rule(
                sysID: try text("sys_id"), name: name, table: table,
                order: try row.value(at: "order", kind: .integer).intValue ?? 100, operations: operations,
                condition: condition, values: Self.fieldValues(try text("template")), aborts: try flag("abort_action"),
                message: try flag("add_message") && !message.isEmpty ? message : nil
            ))
        }
        rules.sort { ($0.order, $0.name, $0.sysID) < ($1.order, $1.name, $1.sysID) }
        state.withLock { state in
            if state.generation == generation { state.rules = rules }
        }
        return rules
    }

    /// The assignments of a "set field values" template: `field=value` terms joined by `^` (`^^` is a literal
    /// caret), ending in an optional `EQ`.
    static func fieldValues(_ template: String) -> [(field: String, value: String)] {
        var terms: [String] = []
        var current = ""
        var characters = template[...]
        while let character = characters.popFirst() {
            if character == "^" {
                if characters.first == "^" {
                    characters.removeFirst()
                    current.append("^")
                } else {
                    terms.append(current)
                    current = ""
                }
            } else {
                current.append(character)
            }
        }
        terms.append(current)
        return terms.compactMap { term in
            guard term != "EQ", let equals = term.firstIndex(of: "=") else { return nil }
            let field = String(term[..<equals])
            guard !field.isEmpty else { return nil }
            return (field, String(term[term.index(after: equals)...]))
        }
    }
}

extension EngineError {
    /// A business rule refused the write.
    static func aborted(by rule: BusinessRules.Rule, table: String, operation: AccessOperation) -> EngineError {
        let stack = "Operation against file '\(table)' was aborted by Business Rule '\(rule.name)'"
        var error = EngineError(.forbidden, rule.message ?? stack, detail: rule.message == nil ? nil : stack)
        error.table = table
        error.operation = operation
        return error
    }
}

extension RecordStore {
    /// Runs the business rules of `operation` on a record about to be written (its values as they will be
    /// committed; for a delete, as they are): sets their field values into `values` (returning the fields they
    /// changed) or throws when one aborts the write. Inside the writing transaction.
    func applyBusinessRules(
        _ operation: AccessOperation, on table: SchemaCatalog.Table, sysID: String, values: inout [String: String],
        rules: [BusinessRules.Rule], db: SQLExecutor
    ) async throws -> Set<String> {
        var changed = Set<String>()
        for rule in rules {
            if let condition = rule.condition {
                guard try await row(values, of: table, sysID: sysID, matches: condition, db: db) else { continue }
            }
            for (field, value) in rule.values where operation != .delete {
                guard let definition = table.field(field), definition.type.isStored, !field.hasPrefix("sys_") else { continue }
                let stored: String
                do {
                    stored = try FieldCoercion.normalize(value, for: definition)
                } catch {
                    // A value the field cannot hold is the rule's mistake, not the writer's: it is not set.
                    logger.warning(
                        "Business rule sets a value its field cannot hold",
                        metadata: ["rule": "\(rule.name)", "field": "\(table.name).\(field)"]
                    )
                    continue
                }
                if values[field, default: ""] != stored {
                    values[field] = stored
                    changed.insert(field)
                }
            }
            if rule.aborts { throw EngineError.aborted(by: rule, table: table.name, operation: operation) }
        }
        return changed
    }

    /// A one-row SQL source holding a record's values (of class `table`) as the columns of its hierarchy's table: for
    /// judging a row as it is about to be, or was, with the compiler's own conditions.
    func inlineRow(_ row: [String: String], of table: SchemaCatalog.Table, sysID: String) -> SQLFragment {
        "(" + inlineSelect(row, of: table, sysID: sysID) + ")"
    }

    /// ``inlineRow(_:of:sysID:)``'s `SELECT`, unparenthesised (to be joined with `UNION ALL`), with `key` as an
    /// extra column `docket_k` when given. With `only`, just the columns of those names (and `sys_id`).
    func inlineSelect(
        _ row: [String: String], of table: SchemaCatalog.Table, sysID: String, key: Int? = nil, only: Set<String>? = nil
    ) -> SQLFragment {
        var columns: [SQLFragment] = []
        var named = Set<String>()
        for field in catalog.physicalColumns(root: table.root) {
            if let only, !only.contains(field.name), field.name != "sys_id" { continue }
            named.insert(field.name)
            var value = row[field.name] ?? ""
            if field.name == "sys_class_name", table.isInHierarchy { value = table.name }
            if field.name == "sys_id" { value = sysID }
            columns.append(FieldCoercion.sqlValue(value, for: field).fragment + " AS " + .identifier(field.name))
        }
        if !named.contains("sys_id") { columns.append(.bind(sysID) + " AS " + .identifier("sys_id")) }
        if let key { columns.append(SQLFragment(String(key)) + " AS docket_k") }
        return "SELECT " + columns.joined(", ")
    }

    /// Whether a record with these values (of class `table`) matches `query`: judged by the query compiler against
    /// the row itself, as live followers judge rows.
    func row(
        _ row: [String: String], of table: SchemaCatalog.Table, sysID: String, matches query: EncodedQuery, db: SQLExecutor
    ) async throws -> Bool {
        var compiler = compiler(for: table, caller: .system, dialect: db.dialect)
        guard let condition = try compiler.condition(for: query) else { return true }
        compiler.source = inlineRow(row, of: table, sysID: sysID)
        return try await db.integer("SELECT COUNT(*) FROM " + compiler.from + " WHERE " + condition) > 0
    }
}
