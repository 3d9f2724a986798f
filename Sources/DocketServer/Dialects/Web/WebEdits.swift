import DocketModel
import Foundation
import Hummingbird

/// The web UI's forms that change records: comment, edit, run an action, delete, upload, create. Each goes through
/// the engine's one write path; its refusals come back next to the fields they name.
struct WebEdits {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let pages: WebPages
    let configuration: Configuration
    let uploads: UploadGate

    var items: WebItems { WebItems(store: store, pages: pages, configuration: configuration) }

    func add(to router: Router<Context>) {
        let base = "/app/item/:table/:id"
        router.post(RouterPath(base + "/comment")) { request, context in try await comment(request, context: context) }
        router.post(RouterPath(base + "/edit")) { request, context in try await edit(request, context: context) }
        router.get(RouterPath(base + "/action/:action")) { _, context in try await actionForm(context: context) }
        router.post(RouterPath(base + "/action/:action")) { request, context in try await runAction(request, context: context) }
        router.get(RouterPath(base + "/delete")) { _, context in try await deleteForm(context: context) }
        router.post(RouterPath(base + "/delete")) { request, context in try await delete(request, context: context) }
        router.post(RouterPath(base + "/attachments")) { request, context in try await upload(request, context: context) }
        router.get("/app/new/:table") { _, context in try await createForm(context: context) }
        router.post("/app/new/:table") { request, context in try await create(request, context: context) }
    }

    private func target(_ context: Context) throws -> (table: String, sysID: String) {
        (try context.parameters.require("table"), try context.parameters.require("id"))
    }

    private func form(_ request: Request, _ context: Context) async throws -> WebForm {
        try await WebForm.read(request, context: context, sessions: pages.sessions)
    }

    static func itemPath(_ table: String, _ sysID: String) -> String { "/app/item/\(table)/\(sysID)" }

    // MARK: Comment

    @Sendable func comment(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (table, sysID) = try target(context)
        let form = try await form(request, context)
        let element = form["element"] == "work_notes" ? "work_notes" : "comments"
        guard let text = form.text("text") else {
            return try await items.itemPage(table: table, sysID: sysID, context: context, formError: "Write something first.", status: .badRequest)
        }
        // A comment typed offline and sent by the page once the connection is back carries an Idempotency-Key: sent
        // again (its answer lost), it is not added twice.
        var options = WriteOptions()
        if let header = request.headers[.idempotencyKey] {
            guard let key = IdempotencyClaim.key(fromHeader: header) else { throw WebError(.badRequest, "The Idempotency-Key is not valid.") }
            options.idempotency = IdempotencyClaim(
                userID: caller.userID, key: key,
                fingerprint: IdempotencyClaim.fingerprint(method: "POST", target: request.uri.path, body: Array((element + "\u{0}" + text).utf8))
            )
        }
        do {
            try await store.update(sysID, in: table, values: [element: text], caller: caller, options: options)
        } catch let used as IdempotencyRecords.Used {
            guard used.record.fingerprint == options.idempotency?.fingerprint else {
                throw WebError(.unprocessableContent, "This Idempotency-Key was used for another comment.")
            }
        } catch let error as EngineError where error.code == .badRequest || error.code == .forbidden {
            return try await items.itemPage(
                table: table, sysID: sysID, context: context, formError: WebError(error).message,
                status: error.code == .forbidden ? .forbidden : .badRequest
            )
        }
        return WebAPI.redirect(Self.itemPath(table, sysID))
    }

    // MARK: Edit

    /// The values a form changes: each offered field whose submitted text differs from the record's (references
    /// resolved to sys_ids); fields not offered or locked are never written.
    private func changes(
        _ form: WebForm, views: [FieldView], loaded: WebItems.Loaded, caller: Caller
    ) async throws -> [String: String] {
        var values: [String: String] = [:]
        let renderer = RecordRenderer(catalog: store.catalog, mode: .display, excludeReferenceLink: true, baseURL: "", data: DisplayData())
        for view in views where !view.readOnly {
            guard let submitted = form[view.name], let field = loaded.table.field(view.name) else { continue }
            let current = loaded.record[view.name]
            var value = submitted.replacingOccurrences(of: "\r\n", with: "\n")
            if field.type == .reference {
                value = try await store.resolveReference(
                    value, field: field, keeping: (current, loaded.display(field, renderer: renderer)), caller: caller
                )
            } else if field.maxLength <= 255 {
                value = value.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            if value != current { values[view.name] = value }
        }
        return values
    }

    @Sendable func edit(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (tableName, sysID) = try target(context)
        let form = try await form(request, context)
        let loaded = try await WebItems.load(sysID, table: tableName, store: store, caller: caller)
        let model = store.catalog.stateModel(for: loaded.table)
        let modify = model?.isGoverned == true ? model?.actions(of: .modify).first?.name : nil
        var views = WebItems.controls(for: loaded, action: modify, state: loaded.record["state"], store: store, values: form.fields)
        let expected = form["sys_mod_count"].flatMap { Int($0) }
        do {
            let values = try await changes(form, views: views, loaded: loaded, caller: caller)
            guard !values.isEmpty else { return WebAPI.redirect(Self.itemPath(loaded.table.name, sysID)) }
            var options = WriteOptions(expectedModCount: expected)
            options.action = modify
            try await store.update(sysID, in: loaded.table.name, values: values, caller: caller, options: options)
            return WebAPI.redirect(Self.itemPath(loaded.table.name, sysID) + "?saved=1")
        } catch let problem as ReferenceProblem {
            if let index = views.firstIndex(where: { $0.name == problem.field }) { views[index].message = problem.message }
            return try await items.itemPage(
                table: loaded.table.name, sysID: sysID, context: context, formError: problem.message, editFields: views, status: .badRequest
            )
        } catch let error as EngineError where error.code == .conflict {
            // Someone saved in between: say who and what, keep what this user typed, and let a second save win.
            let current = error.current ?? [:]
            let by = current["sys_updated_by"].map { $0.isEmpty ? "Someone" : $0 } ?? "Someone"
            return try await items.itemPage(
                table: loaded.table.name, sysID: sysID, context: context,
                formError: "\(by) changed this item after you opened it. The details above are theirs; your changes are still in the form. Save again to replace their values with yours.",
                editFields: views, modCount: current["sys_mod_count"], status: .conflict
            )
        } catch let error as EngineError where error.code == .badRequest || error.code == .forbidden {
            let message = WebFields.attach(error, to: &views)
            return try await items.itemPage(
                table: loaded.table.name, sysID: sysID, context: context, formError: message, editFields: views,
                status: error.code == .forbidden ? .forbidden : .badRequest
            )
        }
    }

    // MARK: Actions

    private func action(named name: String, in table: SchemaCatalog.Table) throws -> WorkflowAction {
        guard let model = store.catalog.stateModel(for: table), model.isGoverned, let action = model.action(named: name),
            action.kind != .submit, action.kind != .delete
        else { throw WebError(.notFound, "\(table.label) records have no action \(name.prefix(60)).") }
        return action
    }

    private func actionPage(
        _ loaded: WebItems.Loaded, action: WorkflowAction, views: [FieldView], error: String?, context: Context,
        status: HTTPResponse.Status = .ok, modCount: String? = nil
    ) -> Response {
        let table = loaded.table
        // What the action requires comes first.
        let views = views.filter(\.mandatory) + views.filter { !$0.mandatory }
        let label = action.name.replacingOccurrences(of: "_", with: " ")
        let destination = action.destination.isEmpty ? nil : store.catalog.choiceLabel(action.destination, field: "state", in: table)
        var form: [String: Any] = [
            "kind": "\(table.label) \(loaded.record["number"])", "heading": "\(label): \(loaded.record["short_description"])",
            "action": Self.itemPath(table.name, loaded.record.sysID) + "/action/\(action.name)",
            "fields": views, "submit": label, "cancel": Self.itemPath(table.name, loaded.record.sysID), "guard": true,
            "modCount": modCount ?? loaded.record["sys_mod_count"],
        ]
        if let destination { form["intro"] = "This moves the \(table.label.lowercased()) to \(destination). Fields marked * are required." }
        if let error { form["formError"] = error }
        let live: [String: String] = [
            "table": table.name, "query": EncodedQuery.where("sys_id", .equals, loaded.record.sysID).description,
            "sysID": loaded.record.sysID,
        ]
        return pages.page("form", ["title": "\(label) \(loaded.record["number"])", "form": form, "live": live], context: context, status: status)
    }

    @Sendable func actionForm(context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (tableName, sysID) = try target(context)
        let loaded = try await WebItems.load(sysID, table: tableName, store: store, caller: caller)
        let action = try action(named: try context.parameters.require("action"), in: loaded.table)
        let model = store.catalog.stateModel(for: loaded.table)
        let state = model?.state(after: action, from: loaded.record["state"], saved: loaded.record["unduplicate_state"]) ?? ""
        let views = WebItems.controls(for: loaded, action: action.name, state: state, store: store)
        var error: String? = nil
        let legal = try await store.legalActions(sysID, in: loaded.table.name, caller: caller)
        if !legal.contains(where: { $0.name == action.name }) {
            error = "\(action.name) cannot run on this \(loaded.table.label.lowercased()) now; it may have changed, or you may not run it."
        }
        return actionPage(loaded, action: action, views: views, error: error, context: context)
    }

    @Sendable func runAction(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (tableName, sysID) = try target(context)
        let form = try await form(request, context)
        let loaded = try await WebItems.load(sysID, table: tableName, store: store, caller: caller)
        let action = try action(named: try context.parameters.require("action"), in: loaded.table)
        let model = store.catalog.stateModel(for: loaded.table)
        let state = model?.state(after: action, from: loaded.record["state"], saved: loaded.record["unduplicate_state"]) ?? ""
        var views = WebItems.controls(for: loaded, action: action.name, state: state, store: store, values: form.fields)
        do {
            let values = try await changes(form, views: views, loaded: loaded, caller: caller)
            var options = WriteOptions(expectedModCount: form["sys_mod_count"].flatMap { Int($0) })
            options.action = action.name
            try await store.update(sysID, in: loaded.table.name, values: values, caller: caller, options: options)
            return WebAPI.redirect(Self.itemPath(loaded.table.name, sysID) + "?saved=1")
        } catch let problem as ReferenceProblem {
            if let index = views.firstIndex(where: { $0.name == problem.field }) { views[index].message = problem.message }
            return actionPage(loaded, action: action, views: views, error: problem.message, context: context, status: .badRequest)
        } catch let error as EngineError where error.code == .conflict {
            let by = error.current?["sys_updated_by"] ?? "Someone"
            return actionPage(
                loaded, action: action, views: views,
                error: "\(by.isEmpty ? "Someone" : by) changed this item after you opened this form. Check the item, then run \(action.name) again.",
                context: context, status: .conflict, modCount: error.current?["sys_mod_count"]
            )
        } catch let error as EngineError where error.code == .badRequest || error.code == .forbidden {
            let message = WebFields.attach(error, to: &views)
            return actionPage(
                loaded, action: action, views: views, error: message, context: context,
                status: error.code == .forbidden ? .forbidden : .badRequest
            )
        }
    }

    // MARK: Delete

    @Sendable func deleteForm(context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (tableName, sysID) = try target(context)
        let loaded = try await WebItems.load(sysID, table: tableName, store: store, caller: caller)
        let name = [loaded.record["number"], loaded.record["short_description"]].filter { !$0.isEmpty }.joined(separator: " ")
        let form: [String: Any] = [
            "kind": loaded.table.label, "heading": "Delete \(loaded.record["number"].isEmpty ? "this item" : loaded.record["number"])?",
            "intro": "\(name.isEmpty ? "This item" : name) will be deleted with its comments and attachments. This cannot be undone.",
            "action": Self.itemPath(loaded.table.name, sysID) + "/delete", "fields": [FieldView](), "submit": "Delete",
            "danger": true, "cancel": Self.itemPath(loaded.table.name, sysID),
        ]
        return pages.page("form", ["title": "Delete \(loaded.record["number"])", "form": form], context: context)
    }

    @Sendable func delete(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (tableName, sysID) = try target(context)
        _ = try await form(request, context)
        let loaded = try await WebItems.load(sysID, table: tableName, store: store, caller: caller)
        try await store.delete(sysID, from: loaded.table.name, caller: caller)
        let number = loaded.record["number"].addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        return WebAPI.redirect("/app/work?deleted=" + number)
    }

    // MARK: Attachments

    @Sendable func upload(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (tableName, sysID) = try target(context)
        do {
            return try await uploads.admit(user: caller.userName) {
                let form = try await form(request, context)
                guard let file = form.files.first, !(file.fileName ?? "").isEmpty else {
                    return try await items.itemPage(table: tableName, sysID: sysID, context: context, formError: "Choose a file to upload.", status: .badRequest)
                }
                let loaded = try await WebItems.load(sysID, table: tableName, store: store, caller: caller)
                do {
                    _ = try await store.addAttachment(
                        .init(
                            tableName: loaded.table.name, recordID: sysID, fileName: String((file.fileName ?? "file").prefix(200)),
                            contentType: file.contentType ?? "application/octet-stream", content: file.body
                        ),
                        caller: caller,
                        quota: AttachmentQuota(perRecord: configuration.attachmentQuotaPerRecord, perUser: configuration.attachmentQuotaPerUser)
                    )
                } catch let error as EngineError where error.code != .notFound {
                    return try await items.itemPage(
                        table: loaded.table.name, sysID: sysID, context: context, formError: WebError(error).message, status: WebError(error).status
                    )
                }
                return WebAPI.redirect(Self.itemPath(loaded.table.name, sysID))
            }
        } catch let refusal as UploadGate.Refusal {
            var error =
                refusal == .busy
                ? WebError(.serviceUnavailable, "Too many files are being uploaded right now. Try again in a moment.")
                : WebError(.tooManyRequests, "You are already uploading \(uploads.perUser) files. Wait for one to finish, then try again.")
            error.retryAfter = UploadGate.Refusal.retryAfter
            throw error
        }
    }

    // MARK: Create

    private func creatable(_ context: Context) throws -> (SchemaCatalog.Table, Caller) {
        let caller = try context.requireCaller()
        let name = context.parameters.get("table") ?? ""
        guard let table = store.catalog.table(name) else { throw WebError(.notFound, "There is no table \(name.prefix(80)).") }
        guard store.mayCreate(in: table.name, caller: caller) else {
            throw WebError(.forbidden, "You may not create \(table.label.lowercased()) records.")
        }
        return (table, caller)
    }

    /// The fields of a new record: what the submit action (or the dictionary) lets a creator set.
    private func newFields(_ table: SchemaCatalog.Table, values: [String: String]) -> [FieldView] {
        let model = store.catalog.stateModel(for: table)
        let submit = model?.isGoverned == true ? model?.actions(of: .submit).first : nil
        let empty = WebItems.Loaded(table: table, record: Record(table: table.name, sysID: "", values: [:]), references: [:])
        var views = WebItems.controls(
            for: empty, action: submit?.name, state: submit?.destination ?? "", store: store, values: values
        )
        views.removeAll { view in
            guard !view.readOnly, !(view.name == "state" && submit == nil) else { return true }
            guard !view.mandatory, let field = table.field(view.name) else { return false }
            return !WebFields.isFilledAtCreation(field, in: table)
        }
        for index in views.indices where views[index].name == "short_description" { views[index].mandatory = true }
        return views
    }

    private func createPage(
        _ table: SchemaCatalog.Table, views: [FieldView], error: String?, context: Context, status: HTTPResponse.Status = .ok
    ) -> Response {
        var form: [String: Any] = [
            "kind": "New", "heading": "New \(table.label.lowercased())",
            "intro": "Fields marked * are required.", "action": "/app/new/\(table.name)", "fields": views,
            "submit": "Create \(table.label.lowercased())", "cancel": "/app/work", "guard": true,
        ]
        if let error { form["formError"] = error }
        return pages.page("form", ["title": "New \(table.label.lowercased())", "form": form], context: context, status: status)
    }

    @Sendable func createForm(context: Context) async throws -> Response {
        let (table, _) = try creatable(context)
        return createPage(table, views: newFields(table, values: [:]), error: nil, context: context)
    }

    @Sendable func create(_ request: Request, context: Context) async throws -> Response {
        let (table, caller) = try creatable(context)
        let form = try await form(request, context)
        var views = newFields(table, values: form.fields)
        do {
            var values: [String: String] = [:]
            for view in views {
                guard let submitted = form[view.name], let field = table.field(view.name) else { continue }
                var value = submitted.replacingOccurrences(of: "\r\n", with: "\n")
                if field.type == .reference {
                    value = try await store.resolveReference(value, field: field, keeping: ("", ""), caller: caller)
                } else if field.maxLength <= 255 {
                    value = value.trimmingCharacters(in: .whitespacesAndNewlines)
                }
                if !value.isEmpty { values[view.name] = value }
            }
            if (values["short_description"] ?? "").isEmpty {
                let index = views.firstIndex { $0.name == "short_description" }
                if let index { views[index].message = "Required" }
                return createPage(table, views: views, error: "Give it a short description.", context: context, status: .badRequest)
            }
            let sysID = try await store.insert(into: table.name, values: values, caller: caller)
            return WebAPI.redirect(Self.itemPath(table.name, sysID))
        } catch let problem as ReferenceProblem {
            if let index = views.firstIndex(where: { $0.name == problem.field }) { views[index].message = problem.message }
            return createPage(table, views: views, error: problem.message, context: context, status: .badRequest)
        } catch let error as EngineError where error.code == .badRequest || error.code == .forbidden {
            let message = WebFields.attach(error, to: &views)
            return createPage(table, views: views, error: message, context: context, status: error.code == .forbidden ? .forbidden : .badRequest)
        }
    }
}
