import DocketModel
import Foundation
import Hummingbird
import OrderedCollections

/// Compass's record endpoints below `/repos/{repo}/databases/{db}`: the record type (`GET …/records/{type}`),
/// records by display id or dbid, their single fields with choice lists, and deletion through the Delete action.
struct CompassRecords {
    typealias Context = DocketRequestContext

    let store: RecordStore

    /// Paths match with or without a trailing slash (the app's create call ends in `…/defect/`): the router
    /// treats both alike.
    func add(to router: Router<Context>, base: String) {
        router.get(RouterPath(base + "/records/:type")) { _, context in
            let type = try Self.recordType(context)
            return Response.json(recordTypeJSON(type))
        }
        router.get(RouterPath(base + "/records/:type/:id")) { request, context in
            let type = try Self.recordType(context)
            let view = try await view(type, request: request, context: context)
            return Response.json(try await recordJSON(type, view: view, caller: try caller(context)))
        }
        router.delete(RouterPath(base + "/records/:type/:id")) { request, context in
            let type = try Self.recordType(context)
            let view = try await view(type, request: request, context: context)
            guard view.record != nil else { throw CompassError(.badRequest, "A record not yet committed is discarded with Revert") }
            if let edit = view.edit, edit.session != (try Self.session(context)), edit.expires > SessionStore.now() {
                throw CompassError(.conflict, "The record is being edited by someone else")
            }
            let action = request.uri.queryParameters.get("actionName")
            try await store.delete(view.sysID, from: type.table, caller: try caller(context), action: action)
            return Response(status: .noContent)
        }
        router.get(RouterPath(base + "/records/:type/:id/fields/:field")) { request, context in
            let type = try Self.recordType(context)
            guard let name = context.parameters.get("field"), let field = type.field(name) else {
                throw CompassError(.notFound, "\(type.name) has no field \(context.parameters.get("field") ?? "")")
            }
            let view = try await view(type, request: request, context: context)
            let caller = try caller(context)
            var json = fieldJSON(field, type: type, view: view)
            json["fieldChoiceList"] = .array(try await choices(for: field, type: type, caller: caller).map(JSONValue.string))
            return Response.json(.object(json))
        }
    }

    // MARK: Reading

    func caller(_ context: Context) throws -> Caller {
        guard let caller = context.caller else { throw CompassError.unauthenticated }
        return caller
    }

    /// A record as one caller sees it: committed, or inside that caller's own edit (a new record exists only there).
    struct View: Sendable {
        var sysID: String
        var record: Record?
        var edit: EditSessions.Edit?
        /// Every field's value by Compass name.
        var values: [String: String]
        /// The state behaviours are judged for: the record's, or where the edit's action leads.
        var state: String
        var action: String
    }

    /// The caller's session, as edits record it.
    static func session(_ context: Context) throws -> String {
        guard let claims = context.compassClaims else { throw CompassError.unauthenticated }
        return EditSessions.hash(claims.session)
    }

    /// The record a path names (display id, or dbid with `useDbid=true`), as the caller sees it.
    func view(_ type: CompassRecordType, request: Request, context: Context) async throws -> View {
        guard let id = context.parameters.get("id") else { throw CompassError(.badRequest, "A record id is needed") }
        return try await view(
            type, id: id, useDbid: request.uri.queryParameters.get("useDbid")?.lowercased() == "true", context: context
        )
    }

    func view(_ type: CompassRecordType, id: String, useDbid: Bool = false, context: Context) async throws -> View {
        guard !id.isEmpty, id.utf8.count <= 100 else { throw CompassError(.badRequest, "A record id is needed") }
        guard let table = store.catalog.table(type.table) else { throw CompassError(.notFound, "No record type \(type.name)") }
        var number = id
        if useDbid {
            guard let prefix = numberPrefix(of: table),
                let derived = type.number(ofDbid: id, prefix: prefix, digits: numberDigits(of: table))
            else { throw CompassError(.notFound, "No \(type.name) with dbid \(id)") }
            number = derived
        }
        let caller = try caller(context)
        let session = try Self.session(context)
        let edits = EditSessions(storage: store.storage)
        let model = store.catalog.stateModel(for: table)
        if let edit = try await edits.edit(displayID: number), edit.isNew {
            guard edit.session == session else { throw CompassError(.notFound, "No \(type.name) \(id)") }
            var values = newValues(type, table: table, caller: caller, displayID: edit.displayID)
            for (name, value) in edit.values { values[name] = value }
            let state = model?.action(named: edit.action).map { model!.state(after: $0, from: "", saved: "") } ?? ""
            return View(sysID: edit.recordID, record: nil, edit: edit, values: values, state: state, action: edit.action)
        }
        let page = try await store.list(
            RecordQuery(table: type.table, query: EncodedQuery().and("number", .equals, number), fields: type.engineFields, limit: 1),
            caller: caller
        )
        guard let record = page.records.first else { throw CompassError(.notFound, "No \(type.name) \(id)") }
        let journals = Set(type.fields.compactMap { field -> String? in
            if case .notesLog(let element) = field.source { return element }
            return nil
        })
        let notes = try await store.journalEntries(for: [record.sysID], elements: journals)[record.sysID] ?? []
        var values = compassValues(type, record: record, table: table, notes: notes)
        var state = record["state"]
        var action = "Modify"
        let edit = try await edits.edit(recordID: record.sysID)
        if let edit, edit.session == session {
            for (name, value) in edit.values { values[name] = value }
            action = edit.action
            if let run = model?.action(named: edit.action) {
                state = model!.state(after: run, from: state, saved: record["unduplicate_state"])
            }
        }
        return View(sysID: record.sysID, record: record, edit: edit, values: values, state: state, action: action)
    }

    func numberPrefix(of table: SchemaCatalog.Table) -> String? { store.catalog.numbering(of: table)?.prefix }

    private func numberDigits(of table: SchemaCatalog.Table) -> Int { store.catalog.numbering(of: table)?.digits ?? 7 }

    // MARK: Shapes

    static func actionType(_ kind: WorkflowActionKind) -> String { "_" + kind.rawValue.uppercased() }

    func stateLabel(_ value: String, table: SchemaCatalog.Table) -> String {
        value.isEmpty ? "" : store.catalog.choiceLabel(value, field: "state", in: table) ?? value
    }

    func recordTypeJSON(_ type: CompassRecordType) -> JSONValue {
        guard let table = store.catalog.table(type.table) else { return .object([:]) }
        let model = store.catalog.stateModel(for: table)
        let fieldDefs = type.fields.map { field -> JSONValue in
            let behavior = requiredness(field, table: table, model: model, action: "Submit", state: "1")
            return JSONValue(members: [
                ("name", .string(field.name)), ("type", .string(field.type)), ("helpText", .string(field.helpText)),
                ("requiredness", .string(behavior)),
            ])
        }
        let actions = (model?.actions ?? []).map { action -> JSONValue in
            JSONValue(members: [
                ("name", .string(action.name)), ("actionType", .string(Self.actionType(action.kind))),
                ("actionSourceStateNames", .array(action.sources.map { .string(stateLabel($0, table: table)) })),
                ("actionDestStateName", .string(stateLabel(action.destination, table: table))),
            ])
        }
        return JSONValue(members: [
            ("name", .string(type.name)), ("dbId", .string("16777300")), ("type", .string("_REQ_ENTITY")),
            ("isFamily", .bool(false)), ("fieldDefs", .array(fieldDefs)), ("actions", .array(actions)),
        ])
    }

    /// MANDATORY, OPTIONAL or READONLY for a field while `action` runs towards `state`.
    private func requiredness(
        _ field: CompassRecordType.Field, table: SchemaCatalog.Table, model: StateModel?, action: String, state: String
    ) -> String {
        guard let name = field.engineField, let definition = table.field(name) else { return "READONLY" }
        if name == "number" { return "READONLY" }
        switch RecordStore.behavior(of: definition, model: model, action: action, state: state) {
        case .mandatory: return "MANDATORY"
        case .optional: return "OPTIONAL"
        case .readOnly: return "READONLY"
        }
    }

    /// Every field's value as Compass shows it, from a committed record (and its journal entries, newest first, for
    /// Notes_Log; lists leave them out).
    func compassValues(
        _ type: CompassRecordType, record: Record, table: SchemaCatalog.Table, notes: [JournalEntry] = []
    ) -> [String: String] {
        var values: [String: String] = [:]
        for field in type.fields {
            switch field.source {
            case .value(let name): values[field.name] = record[name]
            case .choice(let name): values[field.name] = store.catalog.choiceLabel(record[name], field: name, in: table) ?? record[name]
            case .reference(let name, let display): values[field.name] = record[name].isEmpty ? "" : record[name + "." + display]
            case .state: values[field.name] = stateLabel(record["state"], table: table)
            case .dbid: values[field.name] = type.dbid(ofNumber: record["number"]) ?? ""
            case .recordType: values[field.name] = type.name
            case .active: values[field.name] = record["active"] == "true" ? "1" : "0"
            case .isDuplicate: values[field.name] = record["unduplicate_state"].isEmpty ? "0" : "1"
            case .notesLog(let element): values[field.name] = Self.notesLog(notes.filter { $0.element == element })
            case .journal, .none: values[field.name] = ""
            }
        }
        return values
    }

    /// Notes as Compass's Notes package logs them, newest first: a header line per note, then its text.
    static func notesLog(_ entries: [JournalEntry]) -> String {
        entries.map { entry in
            "==== \(entry.createdOn) by \(entry.createdBy) ====\n\(entry.value)"
        }.joined(separator: "\n\n")
    }

    /// The values of a record not yet committed: defaults, the caller as submitter, its provisional id.
    func newValues(_ type: CompassRecordType, table: SchemaCatalog.Table, caller: Caller, displayID: String) -> [String: String] {
        var values: [String: String] = [:]
        for field in type.fields {
            switch field.source {
            case .choice(let name):
                let stored = table.field(name)?.defaultValue ?? ""
                values[field.name] = stored.isEmpty ? "" : store.catalog.choiceLabel(stored, field: name, in: table) ?? stored
            case .recordType: values[field.name] = type.name
            default: values[field.name] = ""
            }
        }
        values["id"] = displayID
        values["Submitter"] = caller.userName
        values["is_active"] = "1"
        values["is_duplicate"] = "0"
        return values
    }

    func fieldJSON(_ field: CompassRecordType.Field, type: CompassRecordType, view: View) -> OrderedJSON {
        guard let table = store.catalog.table(type.table) else { return [:] }
        let text = view.values[field.name] ?? ""
        let model = store.catalog.stateModel(for: table)
        let requiredness = requiredness(field, table: table, model: model, action: view.action, state: view.state)
        let maxLength = field.type == "SHORT_STRING" ? 254 : 0
        return [
            "name": .string(field.name), "value": .string(text),
            "valueAsList": .array(text.isEmpty ? [] : text.split(separator: "\n").map { JSONValue.string(String($0)) }),
            "valueStatus": .string(text.isEmpty ? "HAS_NO_VALUE" : "HAS_VALUE"), "validationStatus": .string("_KNOWN_VALID"),
            "requiredness": .string(requiredness), "requirednessForUser": .string(requiredness), "type": .string(field.type),
            "messageText": .string(""), "maxLength": .integer(maxLength),
        ]
    }

    func recordJSON(_ type: CompassRecordType, view: View, caller: Caller, errorMessage: String = "") async throws -> JSONValue {
        let fields = type.fields.map { JSONValue.object(fieldJSON($0, type: type, view: view)) }
        let legal = view.record == nil ? [] : try await store.legalActions(view.sysID, in: type.table, caller: caller)
        let number = view.values["id"] ?? ""
        let empty = JSONValue(members: [
            ("dbId", .string("")), ("displayName", .string("")), ("entityDefName", .string("")), ("viewURL", .string("")),
        ])
        return JSONValue(members: [
            ("dbId", .string(view.values["dbid"] ?? "")), ("displayName", .string(number)),
            ("entityDefName", .string(type.name)), ("fields", .array(fields)),
            ("legalActions", .array(legal.map {
                JSONValue(members: [("actionName", .string($0.name)), ("formDefName", .string(type.name + "_Base_" + $0.name))])
            })),
            ("isEditable", .bool(view.record == nil || legal.contains { $0.kind == .modify })),
            ("viewURL", .string("/cqweb/restapi/SampleRepository/SAMPL/RECORD/\(number)")),
            ("isDuplicate", .bool(view.values["is_duplicate"] == "1")), ("isOriginal", .bool(false)),
            ("hasDuplicates", .bool(false)), ("original", empty), ("duplicates", .array([])),
            ("errorMessage", .string(errorMessage)),
        ])
    }

    /// The values a field may take: choice labels, or for a reference the names of what it may point to.
    func choices(for field: CompassRecordType.Field, type: CompassRecordType, caller: Caller) async throws -> [String] {
        guard let table = store.catalog.table(type.table) else { return [] }
        switch field.source {
        case .choice(let name): return store.catalog.choices(for: name, in: table)?.map(\.label) ?? []
        case .state: return store.catalog.choices(for: "state", in: table)?.map(\.label) ?? []
        case .reference(let name, let display):
            guard let target = table.field(name)?.reference else { return [] }
            var query = try EncodedQuery("ORDERBY" + display)
            if store.catalog.table(target)?.field("active") != nil { query = query.and("active", .equals, "true") }
            return try await store.list(RecordQuery(table: target, query: query, fields: [display], limit: 1_000), caller: caller)
                .records.map { $0[display] }.filter { !$0.isEmpty }
        default: return []
        }
    }

    // MARK: Paths and bodies

    /// The database a path names, which must be the one the caller's token is bound to.
    static func scope(_ context: Context) throws -> (name: String, dbId: String, description: String) {
        guard let repo = context.parameters.get("repo").flatMap(CompassDirectory.repository) else {
            throw CompassError(.notFound, "No repository \(context.parameters.get("repo") ?? "")")
        }
        guard let database = context.parameters.get("db").flatMap(CompassDirectory.database) else {
            throw CompassError(.notFound, "No database \(context.parameters.get("db") ?? "") in \(repo)")
        }
        if let claims = context.compassClaims,
            claims.repo.caseInsensitiveCompare(repo) != .orderedSame
                || claims.database.caseInsensitiveCompare(database.name) != .orderedSame
        {
            throw CompassError(.forbidden, "This token is for \(claims.repo)/\(claims.database); log in to \(repo)/\(database.name)")
        }
        return database
    }

    static func recordType(_ context: Context) throws -> CompassRecordType {
        _ = try scope(context)
        guard let name = context.parameters.get("type"), let type = CompassDirectory.recordType(name) else {
            throw CompassError(.notFound, "No record type \(context.parameters.get("type") ?? "")")
        }
        return type
    }

    /// A JSON object body; `{}` when empty.
    static func body(_ request: Request, context: Context) async throws -> JSONValue {
        guard let json = try await RequestBody.object(from: request, upTo: context.maxBodySize) else {
            throw CompassError(.badRequest, "The body must be a JSON object")
        }
        return json
    }
}

typealias OrderedJSON = OrderedDictionary<String, JSONValue>
