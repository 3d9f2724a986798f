import DocketModel
import Foundation
import Hummingbird

/// Compass's edit model: `PATCH …/records/{type}/{id}?operation=Edit&actionName=A` starts an action (held in
/// ``EditSessions``, locking the record), further Edits set values, `operation=Commit` validates and writes through
/// the engine, `operation=Revert` discards. `POST …/records/{type}?operation=Edit` starts a new record under a
/// provisional id; `operation=Commit` creates one at once.
struct CompassEdits {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let records: CompassRecords
    var edits: EditSessions { EditSessions(storage: store.storage) }

    func add(to router: Router<Context>, base: String) {
        router.patch(RouterPath(base + "/records/:type/:id")) { request, context in
            let type = try CompassRecords.recordType(context)
            let body = try await CompassRecords.body(request, context: context)
            let view = try await records.view(type, request: request, context: context)
            switch (request.uri.queryParameters.get("operation") ?? "Edit").lowercased() {
            case "edit":
                return try await edit(type, view: view, body: body, request: request, context: context)
            case "commit":
                return try await commit(type, view: view, body: body, request: request, context: context)
            case "revert":
                let session = try CompassRecords.session(context)
                if let edit = view.edit, edit.session == session { try await edits.end(recordID: edit.recordID, session: session) }
                // A new record reverted is gone; the answer is still a Record (as it stood), for strict decoders.
                guard view.record != nil else { return Response.json(try await records.recordJSON(type, view: view, caller: try records.caller(context))) }
                let fresh = try await records.view(type, request: request, context: context)
                return Response.json(try await records.recordJSON(type, view: fresh, caller: try records.caller(context)))
            default:
                throw CompassError(.badRequest, "operation must be Edit, Commit or Revert")
            }
        }
        router.post(RouterPath(base + "/records/:type")) { request, context in
            let type = try CompassRecords.recordType(context)
            let body = try await CompassRecords.body(request, context: context)
            let caller = try records.caller(context)
            let given = try fieldValues(type, body: body)
            switch (request.uri.queryParameters.get("operation") ?? "Commit").lowercased() {
            case "edit":
                let id = SysID.generate()
                let display = "NEW" + String(id.prefix(8)).uppercased()
                try await edits.begin(EditSessions.Edit(
                    recordID: id, table: type.table, isNew: true, displayID: display, session: try CompassRecords.session(context),
                    userID: caller.userID, action: "Submit", values: given, expires: 0
                ))
                let view = try await records.view(type, id: display, context: context)
                return Response.json(try await records.recordJSON(type, view: view, caller: caller), status: .created)
            case "commit":
                var options = WriteOptions()
                options.action = request.uri.queryParameters.get("actionName")
                let sysID = try await store.insert(
                    into: type.table, values: try await engineValues(type, given, caller: caller), caller: caller, options: options
                )
                let number = try await store.get(sysID, in: type.table, fields: ["number"], caller: caller).record["number"]
                let view = try await records.view(type, id: number, context: context)
                return Response.json(try await records.recordJSON(type, view: view, caller: caller), status: .created)
            default:
                throw CompassError(.badRequest, "operation must be Edit or Commit")
            }
        }
    }

    /// Starts the action, or applies values to the caller's edit.
    private func edit(
        _ type: CompassRecordType, view: CompassRecords.View, body: JSONValue, request: Request, context: Context
    ) async throws -> Response {
        let session = try CompassRecords.session(context)
        let caller = try records.caller(context)
        let given = try fieldValues(type, body: body)
        if let edit = view.edit, edit.session == session, edit.expires > SessionStore.now() {
            _ = try await edits.update(recordID: edit.recordID, session: session, values: merge(edit.values, given))
        } else {
            _ = try await begin(type, view: view, values: given, request: request, session: session, caller: caller)
        }
        let fresh = try await records.view(type, id: view.values["id"] ?? "", context: context)
        return Response.json(try await records.recordJSON(type, view: fresh, caller: caller))
    }

    /// Validates and writes the edit (with the body's values); on failure the edit stays, with the body's values.
    private func commit(
        _ type: CompassRecordType, view: CompassRecords.View, body: JSONValue, request: Request, context: Context
    ) async throws -> Response {
        let session = try CompassRecords.session(context)
        let caller = try records.caller(context)
        let given = try fieldValues(type, body: body)
        var held: EditSessions.Edit
        if let edit = view.edit, edit.session == session, edit.expires > SessionStore.now() {
            held = edit
        } else {
            guard view.record != nil else { throw CompassError(.notFound, "No \(type.name) \(view.values["id"] ?? "")") }
            held = try await begin(type, view: view, values: [], request: request, session: session, caller: caller)
        }
        held.values = merge(held.values, given)
        var options = WriteOptions()
        options.action = held.action
        do {
            let values = try await engineValues(type, held.values, caller: caller, current: view.record)
            if held.isNew {
                var create = values
                create["sys_id"] = held.recordID
                _ = try await store.insert(into: type.table, values: create, caller: caller, options: options)
            } else {
                try await store.update(held.recordID, in: type.table, values: values, caller: caller, options: options)
            }
        } catch {
            // The edit stays open with what was sent, as Compass keeps a failed commit in edit.
            _ = try? await edits.update(recordID: held.recordID, session: session, values: held.values)
            throw error
        }
        try await edits.end(recordID: held.recordID, session: session)
        let number = try await store.get(held.recordID, in: type.table, fields: ["number"], caller: caller).record["number"]
        let fresh = try await records.view(type, id: number, context: context)
        return Response.json(try await records.recordJSON(type, view: fresh, caller: caller))
    }

    /// Starts the request's action (`actionName`, default Modify) on a committed record, locking it.
    private func begin(
        _ type: CompassRecordType, view: CompassRecords.View, values: [(String, String)], request: Request, session: String,
        caller: Caller
    ) async throws -> EditSessions.Edit {
        let action = try await legalAction(type, view: view, named: request.uri.queryParameters.get("actionName"), caller: caller)
        let edit = EditSessions.Edit(
            recordID: view.sysID, table: type.table, isNew: false, displayID: view.values["id"] ?? "", session: session,
            userID: caller.userID, action: action, values: values, expires: 0
        )
        try await edits.begin(edit)
        return edit
    }

    /// The action to start: the one named (default Modify), which must be legal for the caller now.
    private func legalAction(_ type: CompassRecordType, view: CompassRecords.View, named: String?, caller: Caller) async throws -> String {
        let name = named.flatMap { $0.isEmpty ? nil : $0 } ?? "Modify"
        let legal = try await store.legalActions(view.sysID, in: type.table, caller: caller)
        guard let action = legal.first(where: { $0.name.caseInsensitiveCompare(name) == .orderedSame }), action.kind != .delete else {
            throw CompassError(
                .badRequest, "The action \(name) is not possible on \(view.values["id"] ?? "") in state \(view.values["State"] ?? ""); "
                    + "possible: " + (legal.isEmpty ? "none" : legal.map(\.name).joined(separator: ", "))
            )
        }
        return action.name
    }

    /// `{"fields": [{name, value | valueAsList}]}` as (Compass name, value) pairs; unknown fields are refused.
    func fieldValues(_ type: CompassRecordType, body: JSONValue) throws -> [(String, String)] {
        guard let fields = body["fields"] else { return [] }
        guard let list = fields.arrayValue, list.count <= 200 else { throw CompassError(.badRequest, "fields must be a list") }
        return try list.map { item in
            guard let name = item["name"]?.stringValue, let field = type.field(name) else {
                throw CompassError(.badRequest, "\(type.name) has no field \(item["name"]?.stringValue ?? "(no name)")")
            }
            let value = item["value"]?.stringValue
                ?? item["valueAsList"]?.arrayValue?.compactMap(\.stringValue).joined(separator: "\n") ?? ""
            guard value.utf8.count <= 1_000_000 else { throw CompassError(.contentTooLarge, "\(name) is too long") }
            return (field.name, value)
        }
    }

    private func merge(_ old: [(String, String)], _ new: [(String, String)]) -> [(String, String)] {
        var merged = old.filter { pair in !new.contains { $0.0 == pair.0 } }
        merged += new
        return merged
    }

    /// Compass values as engine values: choice labels to values, references by their display key to sys_ids, the
    /// note entry to a comment. Fields Docket computes are skipped when unchanged and refused when changed.
    func engineValues(
        _ type: CompassRecordType, _ values: [(String, String)], caller: Caller, current: Record? = nil
    ) async throws -> [String: String] {
        guard let table = store.catalog.table(type.table) else { return [:] }
        var result: [String: String] = [:]
        for (name, value) in values {
            guard let field = type.field(name) else { continue }
            switch field.source {
            case .value(let engine):
                if engine == "number" || engine == "sys_mod_count" { continue }
                result[engine] = value
            case .choice(let engine):
                result[engine] = value.isEmpty ? "" : store.catalog.choiceValue(forLabel: value, field: engine, in: table) ?? value
                if let choices = store.catalog.choices(for: engine, in: table), !value.isEmpty,
                    !choices.contains(where: { $0.value == result[engine] })
                {
                    throw CompassError(.badRequest, "\(value) is not a choice of \(field.name): " + choices.map(\.label).joined(separator: ", "))
                }
            case .state:
                let stored = store.catalog.choiceValue(forLabel: value, field: "state", in: table) ?? value
                if stored != current?["state"] { result["state"] = stored }
            case .reference(let engine, let display):
                guard !value.isEmpty else {
                    result[engine] = ""
                    continue
                }
                guard let target = table.field(engine)?.reference,
                    let found = try await store.list(
                        RecordQuery(table: target, query: EncodedQuery().and(display, .equals, value), fields: ["sys_id"], limit: 1),
                        caller: caller
                    ).records.first
                else { throw CompassError(.badRequest, "\(field.name): no \(value)") }
                result[engine] = found.sysID
            case .journal(let engine):
                if !value.isEmpty { result[engine] = value }
            default:
                continue
            }
        }
        return result
    }
}
