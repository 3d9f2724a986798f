import DocketModel
import Foundation
import Hummingbird

/// The item page: the main fields with display values, the comments and work notes, attachments, and what the
/// caller may do next (edit, the legal actions, delete).
struct WebItems {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let pages: WebPages
    let configuration: Configuration

    struct ShownField: Sendable {
        var label: String
        var display: String
        var wide: Bool
    }

    struct ActionLink: Sendable {
        var name: String
        var label: String
    }

    struct Entry: Sendable {
        var element: String
        var kind: String
        var author: String
        var time: String
        var text: String
    }

    struct AttachmentView: Sendable {
        var sysID: String
        var fileName: String
        var size: String
    }

    /// The state as a control of its own next to the actions, where no workflow's actions move the item (an
    /// incident's state is a field): changing it is the commonest edit, so it is not kept inside the collapsed Edit.
    struct StateChange: Sendable {
        var choices: [FieldView.Choice]
        var modCount: String
    }

    struct EditView: Sendable {
        var fields: [FieldView]
        var modCount: String
        var open: Bool
    }

    func add(to router: Router<Context>) {
        router.get("/app/item/:table/:id") { request, context in
            // After a save, the page says so (the form came back to it: nothing else would show it worked).
            let saved = request.uri.queryParameters["saved"] != nil
            return try await itemPage(
                table: try context.parameters.require("table"), sysID: try context.parameters.require("id"), context: context,
                flash: saved ? "Your changes were saved." : nil
            )
        }
        router.get("/app/attachment/:id") { _, context in try await download(context) }
    }

    /// A record as the caller may read it, with the display values of its references and the reference values.
    struct Loaded: Sendable {
        var table: SchemaCatalog.Table
        var record: Record
        var references: [String: [String: String]]

        func display(_ field: FieldDefinition, renderer: RecordRenderer) -> String {
            if field.type == .reference {
                return references[field.reference ?? ""]?[record[field.name]] ?? ""
            }
            return renderer.displayValue(of: ResultColumn(name: field.name, field: field), in: record)
        }
    }

    /// Full names of users by user name (those the caller may read).
    static func fullNames(_ userNames: Set<String>, store: RecordStore, caller: Caller) async throws -> [String: String] {
        guard !userNames.isEmpty else { return [:] }
        let users = try await store.list(
            RecordQuery(
                table: "sys_user", query: .where("user_name", .in, userNames.sorted().joined(separator: ",")),
                fields: ["user_name", "name"], limit: userNames.count, count: false
            ),
            caller: caller
        ).records
        return Dictionary(users.compactMap { $0["name"].isEmpty ? nil : ($0["user_name"], $0["name"]) }, uniquingKeysWith: { a, _ in a })
    }

    static func load(_ sysID: String, table tableName: String, store: RecordStore, caller: Caller) async throws -> Loaded {
        guard store.catalog.table(tableName) != nil, sysID.count <= 64 else { throw WebError(.notFound, "This item does not exist, or you may not see it.") }
        let (_, record) = try await store.get(sysID, in: tableName, caller: caller)
        let table = try store.catalog.table(record.table) ?? store.table(tableName)
        var wanted: [String: Set<String>] = [:]
        for field in WebFields.mainFields(of: table) where field.type == .reference {
            if let target = field.reference, !record[field.name].isEmpty { wanted[target, default: []].insert(record[field.name]) }
        }
        return Loaded(table: table, record: record, references: try await store.displayValues(wanted, caller: caller))
    }

    func itemPage(
        table tableName: String, sysID: String, context: Context, formError: String? = nil, editFields: [FieldView]? = nil,
        modCount: String? = nil, status: HTTPResponse.Status = .ok, flash: String? = nil
    ) async throws -> Response {
        let caller = try context.requireCaller()
        let loaded = try await Self.load(sysID, table: tableName, store: store, caller: caller)
        let (table, record) = (loaded.table, loaded.record)
        let renderer = RecordRenderer(
            catalog: store.catalog, mode: .display, excludeReferenceLink: true, baseURL: "", data: DisplayData(), timeZone: caller.timeZone
        )
        // Who last changed it is shown by full name, as people are everywhere else (the field holds the user name).
        let auditFields: Set<String> = ["sys_updated_by", "sys_created_by"]
        let names = try await Self.fullNames(Set(auditFields.map { record[$0] }.filter { !$0.isEmpty }), store: store, caller: caller)
        let shown = WebFields.mainFields(of: table).compactMap { field -> ShownField? in
            var display = loaded.display(field, renderer: renderer)
            if auditFields.contains(field.name) { display = names[display] ?? display }
            if display.isEmpty, field.name != "short_description", field.name != "state" { return nil }
            return ShownField(label: field.label, display: display, wide: WebFields.isWide(field))
        }
        let model = store.catalog.stateModel(for: table)
        let governed = model?.isGoverned == true
        let (mayWrite, mayDelete) = try await store.permissions(record.sysID, in: table.name, caller: caller)
        var actions: [ActionLink] = []
        var deletable = mayDelete
        var legal: [WorkflowAction] = []
        if governed {
            legal = try await store.legalActions(record.sysID, in: table.name, caller: caller)
            actions = legal.filter { $0.kind != .modify && $0.kind != .delete && $0.kind != .submit }
                .map { ActionLink(name: $0.name, label: $0.name.replacingOccurrences(of: "_", with: " ")) }
            deletable = legal.contains { $0.kind == .delete }
        }
        var edit: EditView? = nil
        let modifies = !governed || legal.contains { $0.kind == .modify }
        if mayWrite, modifies {
            let fields = editFields ?? Self.controls(
                for: loaded, action: governed ? model?.actions(of: .modify).first?.name : nil, state: record["state"], store: store
            )
            if !fields.isEmpty {
                edit = EditView(fields: fields, modCount: modCount ?? record["sys_mod_count"], open: editFields != nil)
            }
        }
        var stateChange: StateChange? = nil
        if !governed, let edit, let state = edit.fields.first(where: { $0.name == "state" && $0.isSelect && !$0.readOnly }) {
            stateChange = StateChange(choices: state.choices, modCount: edit.modCount)
        }
        let elements = ["comments", "work_notes"].filter { table.field($0) != nil }
        var entries: [Entry] = []
        if !elements.isEmpty {
            let journal = try await store.journalEntries(for: [record.sysID], elements: Set(elements))
            let time: (String) -> String = { value in
                guard let zone = caller.timeZone, let date = GlideDateTime.parse(value) else { return value }
                return GlideDateTime.format(date, in: zone)
            }
            entries = (journal[record.sysID] ?? []).map {
                Entry(
                    element: $0.element, kind: $0.element == "work_notes" ? "Work note" : "Comment",
                    author: $0.createdByName ?? $0.createdBy, time: time($0.createdOn), text: $0.value
                )
            }
        }
        let attachments = try await store.list(
            RecordQuery(
                table: "sys_attachment", query: EncodedQuery.where("table_name", .equals, table.name).and("table_sys_id", .equals, record.sysID)
                    .orderBy("sys_created_on"),
                fields: ["sys_id", "file_name", "size_bytes"], limit: 200, count: false
            ),
            caller: caller
        )
        var item: [String: Any] = [
            "table": table.name, "sysID": record.sysID, "tableLabel": table.label,
            "number": record["number"], "shortDescription": record["short_description"],
            "fields": shown, "actions": actions, "mayDelete": deletable,
            "hasJournal": !elements.isEmpty, "hasWorkNotes": elements.contains("work_notes") && mayWrite, "entries": entries,
            "attachments": attachments.records.map {
                AttachmentView(sysID: $0.sysID, fileName: $0["file_name"], size: Self.size($0["size_bytes"]))
            },
        ]
        // Absent, not nil: a nil inside `Any` would render as text.
        if let edit { item["edit"] = edit }
        if let stateChange { item["stateChange"] = stateChange }
        if let formError { item["formError"] = formError }
        let title = [record["number"], record["short_description"]].filter { !$0.isEmpty }.joined(separator: " ")
        var values: [String: Any] = [
            "title": title.isEmpty ? table.label : title, "item": item,
            "live": ["table": table.name, "query": EncodedQuery.where("sys_id", .equals, record.sysID).description, "sysID": record.sysID],
        ]
        if let flash { values["flash"] = flash }
        return pages.page("item", values, context: context, status: status)
    }

    /// The form controls of the fields an action lets the caller set, with the model's behaviour for the action
    /// and the state it leads to (mandatory fields marked, read-only ones locked). `action` nil: a table without
    /// actions, where every editable field (the state too) is offered.
    static func controls(for loaded: Loaded, action: String?, state: String, store: RecordStore, values: [String: String] = [:]) -> [FieldView] {
        let table = loaded.table
        let model = store.catalog.stateModel(for: table)
        let renderer = RecordRenderer(catalog: store.catalog, mode: .display, excludeReferenceLink: true, baseURL: "", data: DisplayData())
        var views: [FieldView] = []
        for field in WebFields.editableFields(of: table) {
            let behavior: FieldBehavior
            if let action {
                if field.name == "state" { continue }
                behavior = RecordStore.behavior(of: field, model: model, action: action, state: state)
            } else {
                behavior = field.mandatory ? .mandatory : .optional
            }
            // What the user submitted wins over the record (a refused form keeps it).
            let submitted = values[field.name]
            var view = WebFields.control(
                field, in: table, catalog: store.catalog, value: submitted ?? loaded.record[field.name],
                display: submitted ?? loaded.display(field, renderer: renderer)
            )
            view.mandatory = behavior == .mandatory
            view.readOnly = behavior == .readOnly
            views.append(view)
        }
        return views
    }

    static func size(_ bytes: String) -> String {
        guard let count = Int(bytes) else { return "" }
        switch count {
        case ..<1024: return "\(count) B"
        case ..<(1024 * 1024): return "\(count / 1024) KB"
        default: return String(format: "%.1f MB", Double(count) / 1_048_576)
        }
    }

    /// `GET /app/attachment/ID`: the file, always as a download (never shown inline on docketd's origin).
    @Sendable func download(_ context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let id = context.parameters.get("id") ?? ""
        guard id.count <= 64 else { throw WebError(.notFound, "There is no such attachment.") }
        let (record, content) = try await store.attachmentContent(id, caller: caller)
        let name = record["file_name"].unicodeScalars.map { $0.isASCII && $0.value >= 0x20 && $0 != "\"" && $0 != "\\" ? String($0) : "_" }.joined()
        let encoded = record["file_name"].addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._"))) ?? "file"
        var headers: HTTPFields = [
            .contentType: "application/octet-stream", .cacheControl: "private, no-store",
            .contentDisposition: "attachment; filename=\"\(name)\"; filename*=UTF-8''\(encoded)",
        ]
        headers[.contentSecurityPolicy] = "sandbox; default-src 'none'"
        headers[.xContentTypeOptions] = "nosniff"
        return Response(status: .ok, headers: headers, body: .init(contentsOf: content))
    }
}
