import DocketModel
import Foundation
import Synchronization

/// A notification rule (`sysevent_email_action`) as the notifier applies it.
struct NotificationRule: Sendable, Equatable {
    var sysID: String
    var name: String
    var table: String
    var onInsert: Bool
    var onUpdate: Bool
    var condition: EncodedQuery
    /// An update must change one of these (none: any update).
    var changedFields: Set<String>
    var recipientFields: [String]
    var recipientUsers: [String]
    var recipientGroups: [String]
    var subject: String
    var message: String
    var weight: Int
}

/// One notification to record: who is told, by which rule, about which change, with what words.
struct PendingNotification: Sendable, Equatable {
    var userID: String
    var rule: String
    var event: ChangeEvent
    var subject: String
    var message: String
    /// The recipient's devices that must not get this rule's pushes (their preferences).
    var mutedDevices: [String] = []
}

/// The engine's half of notifications: which rules a committed change triggers, whom each tells (never the
/// person who made the change, never someone who may not read the record), and the text each recipient reads
/// (display values as that recipient sees them: their time zone, only references they may read).
final class NotificationRules: ChangeObserver {
    let store: RecordStore
    private let loaded = Mutex<[NotificationRule]?>(nil)

    init(store: RecordStore) { self.store = store }

    /// Tables whose changes never notify: notifications themselves, and the devices they go to.
    static let silentTables: Set<String> = [
        "sys_notification", "sys_push_subscription", "sys_notification_preference", "sys_push_application", "sys_push_variant",
    ]

    /// Rules are read again after a change to them.
    func observe(_ event: ChangeEvent) {
        if event.table == "sysevent_email_action" { loaded.withLock { $0 = nil } }
    }

    /// The active rules, cached until one changes.
    func rules() async throws -> [NotificationRule] {
        if let rules = loaded.withLock({ $0 }) { return rules }
        let rows = try await store.storage.read { db in
            try await db.rows(
                "SELECT sys_id, name, collection, action_insert, action_update, condition, changed_fields, recipient_fields,"
                    + " recipient_users, recipient_groups, subject, message_text, weight FROM sysevent_email_action WHERE active = 1"
            )
        }
        var rules: [NotificationRule] = []
        for row in rows {
            func text(_ column: String) throws -> String { try row.value(at: column, kind: .text).text ?? "" }
            func flag(_ column: String) throws -> Bool { (try row.value(at: column, kind: .integer).intValue ?? 0) != 0 }
            func list(_ column: String) throws -> [String] {
                try text(column).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            }
            let condition: EncodedQuery
            let name = try text("name")
            do {
                condition = try EncodedQuery(try text("condition"))
            } catch {
                // A rule whose condition cannot be read tells nobody rather than everybody.
                store.logger.warning("A notification rule's condition cannot be read; the rule is skipped", metadata: [
                    "rule": "\(name)", "error": "\(error)",
                ])
                continue
            }
            rules.append(NotificationRule(
                sysID: try text("sys_id"), name: try text("name"), table: try text("collection"), onInsert: try flag("action_insert"),
                onUpdate: try flag("action_update"), condition: condition, changedFields: Set(try list("changed_fields")),
                recipientFields: try list("recipient_fields"), recipientUsers: try list("recipient_users"),
                recipientGroups: try list("recipient_groups"), subject: try text("subject"), message: try text("message_text"),
                weight: Int(try row.value(at: "weight", kind: .integer).intValue ?? 0)
            ))
        }
        loaded.withLock { $0 = rules }
        return rules
    }

    /// The notifications a committed change gives: for each rule it triggers and each recipient who did not make
    /// the change, may read the record, and whose view of the record after the change meets the rule's condition.
    /// Of the rules with a weight above zero that tell one recipient about one change, only the heaviest do.
    func notifications(for event: ChangeEvent, callers: (String) async throws -> Caller?) async throws -> [PendingNotification] {
        guard event.operation != .delete, !Self.silentTables.contains(event.table),
            let eventClass = store.catalog.table(event.table)
        else { return [] }
        let triggered = try await rules().filter { rule in
            guard eventClass.ancestry.contains(rule.table) else { return false }
            switch event.operation {
            case .insert: return rule.onInsert
            case .update: return rule.onUpdate && (rule.changedFields.isEmpty || !rule.changedFields.isDisjoint(with: event.fields))
            case .delete: return false
            }
        }
        guard !triggered.isEmpty else { return [] }
        var chosen: [String: [NotificationRule]] = [:]
        var order: [String] = []
        for rule in triggered {
            guard let ruleTable = store.catalog.table(rule.table) else { continue }
            for userID in try await recipients(of: rule, event: event, eventClass: eventClass) {
                guard let caller = try await callers(userID), caller.userName != event.userName else { continue }
                let live = LiveQuery(table: ruleTable, query: rule.condition, caller: caller)
                guard let change = try await store.change(event, for: live), change.kind == .entered || change.kind == .changed else {
                    continue
                }
                if chosen[userID] == nil { order.append(userID) }
                chosen[userID, default: []].append(rule)
            }
        }
        // What the recipients chose not to receive: a rule altogether, or a rule on some of their devices.
        let muted = try await preferences(of: order, rules: Set(chosen.values.flatMap { $0.map(\.sysID) }))
        var pending: [PendingNotification] = []
        for userID in order {
            // Weight decides before preferences do: a rule turned off does not let a lighter one speak for it.
            let rules = chosen[userID] ?? []
            let heaviest = rules.map(\.weight).max() ?? 0
            guard let caller = try await callers(userID) else { continue }
            for rule in rules where (rule.weight == 0 || rule.weight == heaviest) && !muted.everywhere.contains(userID + "\u{0}" + rule.sysID) {
                let text = NotificationText(store: store, event: event, eventClass: eventClass, caller: caller)
                pending.append(PendingNotification(
                    userID: userID, rule: rule.sysID, event: event,
                    subject: String(try await text.render(rule.subject).prefix(255)),
                    message: String(try await text.render(rule.message).prefix(4000)),
                    mutedDevices: muted.devices[userID + "\u{0}" + rule.sysID] ?? []
                ))
            }
        }
        return pending
    }

    /// Values bound in one `IN (…)` list (SQLite takes 32,766 parameters, PostgreSQL 65,535).
    static let listChunk = 500

    /// The rules users turned off (`user\0rule`), and the devices on which they turned a rule off.
    private func preferences(of users: [String], rules: Set<String>) async throws -> (everywhere: Set<String>, devices: [String: [String]]) {
        guard !users.isEmpty, !rules.isEmpty else { return ([], [:]) }
        // Bounded lists: a rule may name a group of any size, and databases bound a statement's parameters.
        let rules = Array(rules)
        let rows = try await store.storage.read { db in
            var rows: [ResultRow] = []
            for start in stride(from: 0, to: users.count, by: Self.listChunk) {
                let chunk = Array(users[start..<min(users.count, start + Self.listChunk)])
                for first in stride(from: 0, to: rules.count, by: Self.listChunk) {
                    let ruleChunk = Array(rules[first..<min(rules.count, first + Self.listChunk)])
                    rows += try await db.rows(
                        "SELECT " + .identifier("user") + " AS u, notification, subscription FROM sys_notification_preference WHERE enabled = 0 AND "
                            + .identifier("user") + " IN (" + .bindList(chunk) + ") AND notification IN (" + .bindList(ruleChunk) + ")"
                    )
                }
            }
            return rows
        }
        var everywhere = Set<String>()
        var devices: [String: [String]] = [:]
        for row in rows {
            let key = (try row.value(at: "u", kind: .text).text ?? "") + "\u{0}" + (try row.value(at: "notification", kind: .text).text ?? "")
            let device = try row.value(at: "subscription", kind: .text).text ?? ""
            if device.isEmpty { everywhere.insert(key) } else { devices[key, default: []].append(device) }
        }
        return (everywhere, devices)
    }

    /// The users a rule names for a change: user fields of the record (a reference to a user or a group, or a list
    /// such as `watch_list` of user sys_ids, group sys_ids or e-mail addresses), its users, and its groups' members.
    private func recipients(of rule: NotificationRule, event: ChangeEvent, eventClass: SchemaCatalog.Table) async throws -> [String] {
        let row = event.rowAfter
        var users: [String] = rule.recipientUsers
        var groups: [String] = rule.recipientGroups
        var addresses: [String] = []
        for name in rule.recipientFields {
            guard let field = eventClass.field(name), let value = row[name], !value.isEmpty else { continue }
            let items = field.type == .reference ? [value] : value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            for item in items where !item.isEmpty {
                if field.reference == "sys_user_group" {
                    groups.append(item)
                } else if item.contains("@") {
                    addresses.append(item)
                } else {
                    users.append(item)
                }
            }
        }
        let lookups = (groups: Array(Set(groups).filter(SysID.isValid)), addresses: Array(Set(addresses)))
        if !lookups.groups.isEmpty || !lookups.addresses.isEmpty {
            let found = try await store.storage.read { db -> [String] in
                var found: [String] = []
                for chunk in lookups.groups.chunked(500) {
                    found += try await db.rows(
                        "SELECT " + .identifier("user") + " AS id FROM sys_user_grmember WHERE " + .identifier("group") + " IN ("
                            + .bindList(Array(chunk)) + ")"
                    ).compactMap { try $0.value(at: "id", kind: .text).text }
                }
                for chunk in lookups.addresses.chunked(500) {
                    found += try await db.rows("SELECT sys_id AS id FROM sys_user WHERE email IN (" + .bindList(Array(chunk)) + ")")
                        .compactMap { try $0.value(at: "id", kind: .text).text }
                }
                return found
            }
            users += found
        }
        var seen = Set<String>()
        return users.filter { SysID.isValid($0) && seen.insert($0).inserted }
    }
}

/// A rule's subject or message for one recipient: `${field}` is the field's display value as the recipient sees
/// it after the change; `${changed_by}` names who made it; `${changes}` lists what an update changed (one line a
/// field, `Label: new value`, journal entries with their text); `${table}` is the record's kind. Anything else
/// between `${` and `}` is left out, as ServiceNow does.
struct NotificationText {
    let store: RecordStore
    let event: ChangeEvent
    let eventClass: SchemaCatalog.Table
    let caller: Caller

    func render(_ template: String) async throws -> String {
        var out = ""
        var rest = Substring(template)
        while let start = rest.range(of: "${") {
            out += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else {
                out += rest[start.lowerBound...]
                return out
            }
            out += try await value(String(rest[start.upperBound..<end]).trimmingCharacters(in: .whitespaces))
            rest = rest[rest.index(after: end)...]
        }
        return out + rest
    }

    private func value(_ name: String) async throws -> String {
        switch name {
        case "changed_by":
            return try await actorName()
        case "table":
            return eventClass.label
        case "changes":
            var lines: [String] = []
            for name in event.fields where !name.hasPrefix("sys_") {
                guard let field = eventClass.field(name) else { continue }
                lines.append("\(field.label): \(try await display(field))")
            }
            return lines.joined(separator: "\n")
        default:
            guard let field = eventClass.field(name) else { return "" }
            return try await display(field)
        }
    }

    private func display(_ field: FieldDefinition) async throws -> String {
        let value = event.rowAfter[field.name] ?? ""
        guard !value.isEmpty else { return "" }
        switch field.type {
        case .reference:
            guard let target = field.reference else { return value }
            return try await store.displayValues([target: [value]], caller: caller)[target]?[value] ?? ""
        case .glideDateTime:
            guard let zone = caller.timeZone, let date = GlideDateTime.parse(value) else { return value }
            return GlideDateTime.format(date, in: zone)
        case .password:
            return ""
        default:
            return store.catalog.choiceLabel(value, field: field.name, in: eventClass) ?? value
        }
    }

    private func actorName() async throws -> String {
        let name = event.userName
        return try await store.storage.read { db in
            try await db.rows("SELECT name FROM sys_user WHERE user_name = " + .bind(name)).first?.value(at: "name", kind: .text).text
        }.flatMap { $0.isEmpty ? nil : $0 } ?? name
    }
}
