import DocketModel
import Foundation

/// One field as a form shows it.
struct FieldView: Sendable {
    struct Choice: Sendable {
        var value: String
        var label: String
        var selected: Bool
    }

    var name: String
    var label: String
    /// What the control holds: the stored value of choices and plain fields, the display name of a reference.
    var value: String
    var isSelect = false
    var isTextarea = false
    var isText = false
    var choices: [Choice] = []
    var mandatory = false
    var readOnly = false
    /// The referenced table, for type-ahead.
    var lookup: String?
    /// The engine's message about this field, shown next to it.
    var message: String?
    var wide = false
}

/// Which fields the web UI shows and offers, and how a form's text becomes stored values.
enum WebFields {
    /// The main fields, in this order where a table has them; a table's own fields follow.
    static let preferred = [
        "number", "short_description", "description", "state", "priority", "severity", "impact", "urgency", "category",
        "caller_id", "assigned_to", "assignment_group", "resolution", "keywords", "symptoms", "project", "duplicate_of",
        "opened_by", "opened_at", "sys_updated_on", "sys_updated_by",
    ]
    /// Shown, never edited here: the record's identity and audit trail.
    static let fixed: Set<String> = ["number", "opened_by", "opened_at", "sys_updated_on", "sys_updated_by", "unduplicate_state"]

    static func mainFields(of table: SchemaCatalog.Table) -> [FieldDefinition] {
        var fields = preferred.compactMap { table.field($0) }
        let named = Set(preferred)
        for field in table.fields where field.table == table.name && !named.contains(field.name) && !field.name.hasPrefix("sys_")
            && field.type.isStored && field.type != .password && field.type != .journal && field.name != "unduplicate_state"
        {
            fields.append(field)
        }
        return fields
    }

    /// The fields a form may change: main fields that are not identity or audit, and not read-only in the dictionary.
    static func editableFields(of table: SchemaCatalog.Table) -> [FieldDefinition] {
        mainFields(of: table).filter { !fixed.contains($0.name) && !$0.readOnly && $0.type.isStored }
    }

    /// Fields a person does not fill in when creating a record: what happens later (resolution, closure, reopening,
    /// reassignment), what follows from other fields (priority from impact and urgency) and links made later.
    static let setLater: Set<String> = [
        "reopen_count", "resolved_by", "resolved_at", "close_code", "close_notes", "closed_at", "closed_by",
        "incident_state", "hold_reason", "reassignment_count", "parent_incident", "problem_id", "duplicate_of",
        "unduplicate_state", "resolution", "active", "approval", "escalation", "made_sla", "work_start", "work_end",
        "cause_notes", "fix_notes", "resolution_code", "known_error", "related_incidents", "on_hold",
    ]

    /// Whether a create form offers the field (a field the submit action makes mandatory always is).
    static func isFilledAtCreation(_ field: FieldDefinition, in table: SchemaCatalog.Table) -> Bool {
        if setLater.contains(field.name) || fixed.contains(field.name) { return false }
        if field.name == "priority", table.field("impact") != nil, table.field("urgency") != nil { return false }
        if field.type == .glideDateTime, field.name.hasSuffix("_at") { return false }
        if field.type == .integer, field.name.hasSuffix("_count") { return false }
        return true
    }

    static func isWide(_ field: FieldDefinition) -> Bool { field.maxLength > 255 || field.name == "short_description" }

    /// The control for a field, holding `value` (stored) and showing `display` for references.
    static func control(
        _ field: FieldDefinition, in table: SchemaCatalog.Table, catalog: SchemaCatalog, value: String, display: String
    ) -> FieldView {
        var view = FieldView(name: field.name, label: field.label, value: value, wide: isWide(field))
        if let choices = catalog.choices(for: field.name, in: table), !choices.isEmpty {
            view.isSelect = true
            view.choices = choices.map { FieldView.Choice(value: $0.value, label: $0.label, selected: $0.value == value) }
            if !value.isEmpty, !choices.contains(where: { $0.value == value }) {
                view.choices.insert(FieldView.Choice(value: value, label: value, selected: true), at: 0)
            }
        } else if field.type == .reference {
            view.isText = true
            view.value = display.isEmpty ? value : display
            view.lookup = field.reference
        } else if field.maxLength > 255 {
            view.isTextarea = true
        } else {
            view.isText = true
        }
        return view
    }

    /// Shows the engine's refusal next to the fields it names; returns the sentence to show above the form.
    static func attach(_ error: EngineError, to views: inout [FieldView]) -> String {
        if let validation = error.validation {
            for index in views.indices {
                if validation.missing.contains(views[index].name) {
                    views[index].message = "Required" + (validation.action.map { " for \($0.replacingOccurrences(of: "_", with: " "))" } ?? "")
                    views[index].mandatory = true
                } else if validation.readOnly.contains(views[index].name) {
                    views[index].message = "Cannot be changed now"
                }
            }
        } else if let field = error.field, let index = views.firstIndex(where: { $0.name == field }) {
            views[index].message = error.detail ?? error.message
        }
        return error.detail ?? error.message
    }
}
