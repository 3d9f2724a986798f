import DocketModel
import Foundation
import Hummingbird

/// Compass's workspace: the "Personal Queries" folder of each user and "Public Queries", query definitions kept as
/// `sys_saved_query` records, result sets and their pages, CSV export, and the ad-hoc `…/query`. A result set id is
/// a sealed handle (query, page size, session, expiry) that any instance can read: nothing is kept per result set,
/// and a page is the query run again.
struct CompassQueries {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let records: CompassRecords
    let tokens: CompassTokens

    static let personalFolder = "16777218"
    static let publicFolder = "16777219"
    static let resultSetLifetime = 3_600
    static let maxRows = 10_000

    func add(to router: Router<Context>, base: String) {
        router.get(RouterPath(base + "/workspace/folders")) { _, context in
            _ = try CompassRecords.scope(context)
            return Response.json(.array([try await folder(personal: true, context), try await folder(personal: false, context)]))
        }
        router.get(RouterPath(base + "/workspace/folders/:folder")) { _, context in
            _ = try CompassRecords.scope(context)
            switch context.parameters.get("folder") {
            case Self.personalFolder: return Response.json(try await folder(personal: true, context))
            case Self.publicFolder: return Response.json(try await folder(personal: false, context))
            default: throw CompassError(.notFound, "No folder \(context.parameters.get("folder") ?? "")")
            }
        }
        router.post(RouterPath(base + "/workspace/queryDefs")) { request, context in
            _ = try CompassRecords.scope(context)
            let body = try await CompassRecords.body(request, context: context)
            let definition = try CompassQueryDef(json: body)
            // Checked now, so that a query that cannot run is refused when saved.
            _ = try definition.encodedQuery(for: try records.caller(context), catalog: store.catalog)
            let parent = body["dbIdParent"]?.stringValue ?? Self.personalFolder
            guard parent == Self.personalFolder || parent == Self.publicFolder || parent.isEmpty else {
                throw CompassError(.badRequest, "dbIdParent must be the Personal Queries (\(Self.personalFolder)) or Public Queries (\(Self.publicFolder)) folder")
            }
            let id = try await store.insert(
                into: "sys_saved_query",
                values: [
                    "name": definition.name, "folder": parent == Self.publicFolder ? "public" : "personal",
                    "record_type": definition.recordType.name, "definition": String(decoding: body.serialized(), as: UTF8.self),
                ],
                caller: try records.caller(context)
            )
            return Response.json(try await saved(id: id, context: context).json, status: .created)
        }
        router.get(RouterPath(base + "/workspace/queryDefs/:query")) { _, context in
            Response.json(try await saved(number: context.parameters.get("query") ?? "", context: context).json)
        }
        router.delete(RouterPath(base + "/workspace/queryDefs/:query")) { _, context in
            let query = try await saved(number: context.parameters.get("query") ?? "", context: context)
            try await store.delete(query.sysID, from: "sys_saved_query", caller: try records.caller(context))
            return Response(status: .ok)
        }
        router.post(RouterPath(base + "/workspace/queryDefs/:query/resultsets")) { request, context in
            let query = try await saved(number: context.parameters.get("query") ?? "", context: context)
            let options = try await CompassRecords.body(request, context: context)
            return Response.json(.object(["result_set_id": .string(try handle(query: .string(query.number), options: options, context))]), status: .created)
        }
        router.get(RouterPath(base + "/workspace/queryDefs/:query/resultsets/:set")) { request, context in
            try await page(request, context)
        }
        router.get(RouterPath(base + "/workspace/queryDefs/:query/resultsets/:set/file")) { request, context in
            try await csv(request, context)
        }
        router.post(RouterPath(base + "/query")) { request, context in
            _ = try CompassRecords.scope(context)
            let body = try await CompassRecords.body(request, context: context)
            guard let definition = body["queryDef"] else { throw CompassError(.badRequest, "Send queryDef and resultSetOptions") }
            _ = try CompassQueryDef(json: definition).encodedQuery(for: try records.caller(context), catalog: store.catalog)
            return Response.json(
                .object(["result_set_id": .string(try handle(query: definition, options: body["resultSetOptions"] ?? .object([:]), context))]),
                status: .created
            )
        }
        router.get(RouterPath(base + "/query/:set")) { request, context in try await page(request, context) }
    }

    // MARK: Folders and saved queries

    struct Saved {
        var sysID: String
        var number: String
        var folder: String
        var definition: JSONValue

        /// The QueryDef as the app reads it back: with its ids, and `sortType`, `fieldType`, `dataType` on every column.
        var json: JSONValue {
            var object = definition.objectValue ?? [:]
            object["dbId"] = .string(number)
            object["dbIdParent"] = .string(folder == "public" ? CompassQueries.publicFolder : CompassQueries.personalFolder)
            object["queryFieldDefs"] = .array((definition["queryFieldDefs"]?.arrayValue ?? []).map { column in
                var column = column.objectValue ?? [:]
                if column["sortType"] == nil { column["sortType"] = .string("NO_SORT") }
                if column["isShown"] == nil { column["isShown"] = .bool(true) }
                let path = column["fieldPathName"]?.stringValue ?? ""
                column["fieldType"] = .string(path.lowercased() == "dbid" ? "DBID" : path.lowercased() == "id" ? "ID" : "SHORT_STRING")
                column["dataType"] = .string(path.lowercased().contains("date") || path.lowercased().hasSuffix("timestamp") ? "PD_C_TIMESTAMP" : "PD_C_CHAR")
                return .object(column)
            })
            if object["filterNode"] == nil {
                object["filterNode"] = JSONValue(members: [("boolOp", .string("BOOL_OP_AND")), ("fieldFilters", .array([]))])
            }
            return .object(object)
        }
    }

    private func saved(id: String? = nil, number: String? = nil, context: Context) async throws -> Saved {
        _ = try CompassRecords.scope(context)
        let query = id.map { EncodedQuery().and("sys_id", .equals, $0) } ?? EncodedQuery().and("number", .equals, number ?? "")
        guard (number ?? id ?? "").utf8.count <= 64, let record = try await store.list(
            RecordQuery(table: "sys_saved_query", query: query, fields: ["sys_id", "number", "folder", "definition"], limit: 1),
            caller: try records.caller(context)
        ).records.first else { throw CompassError(.notFound, "No query \(number ?? id ?? "")") }
        let definition = (try? JSONValue.parse(Array(record["definition"].utf8))) ?? .object([:])
        return Saved(sysID: record.sysID, number: record["number"], folder: record["folder"], definition: definition)
    }

    private func folder(personal: Bool, _ context: Context) async throws -> JSONValue {
        let caller = try records.caller(context)
        let condition = personal
            ? EncodedQuery().and("folder", .equals, "personal").and("user", .equals, caller.userID)
            : EncodedQuery().and("folder", .equals, "public")
        var query = condition
        query.orderBy = [OrderTerm("name")]
        let queries = try await store.list(
            RecordQuery(table: "sys_saved_query", query: query, fields: ["number", "name"], limit: 1_000), caller: caller
        ).records
        let name = personal ? "Personal Queries" : "Public Queries"
        return JSONValue(members: [
            ("name", .string(name)), ("dbId", .string(personal ? Self.personalFolder : Self.publicFolder)), ("dbIdParent", .string("")),
            ("masterReplicaName", .string("<local>")), ("workspaceItemType", .string("WORKSPACE_FOLDER")),
            ("pathName", .string(name)), ("isReadable", .bool(true)), ("isWritable", .bool(personal || caller.isAdmin)),
            ("children", .array(queries.map {
                JSONValue(members: [
                    ("name", .string($0["name"])), ("dbId", .string($0["number"])), ("workspaceItemType", .string("WORKSPACE_QUERY")),
                ])
            })),
        ])
    }

    // MARK: Result sets

    /// `{"pageSize":"999"}` (a string, as the iOS app sends it) or `resultSetOptions` with numbers.
    private func handle(query: JSONValue, options: JSONValue, _ context: Context) throws -> String {
        let settings = options["resultSetOptions"] ?? options
        func number(_ key: String) -> Int? { settings[key]?.intValue ?? settings[key]?.stringValue.flatMap { Int($0) } }
        let pageSize = min(max(number("pageSize") ?? 100, 1), Self.maxRows)
        let maxRows = min(max(number("maxResultSetRows") ?? Self.maxRows, 1), Self.maxRows)
        return tokens.seal(JSONValue(members: [
            ("q", query), ("n", .integer(pageSize)), ("m", .integer(maxRows)),
            ("c", .bool(settings["enableRecordCount"] == .bool(true))), ("s", .string(try CompassRecords.session(context))),
            ("e", .integer(SessionStore.now() + Self.resultSetLifetime)),
        ]))
    }

    private struct ResultSet {
        var definition: CompassQueryDef
        var pageSize: Int
        var maxRows: Int
        var count: Bool
    }

    private func resultSet(_ context: Context) async throws -> ResultSet {
        _ = try CompassRecords.scope(context)
        guard let text = context.parameters.get("set"), let sealed = tokens.unseal(text),
            sealed["s"]?.stringValue == (try CompassRecords.session(context)), (sealed["e"]?.intValue ?? 0) > SessionStore.now()
        else { throw CompassError(.notFound, "No such result set (they last an hour, for the session that made them)") }
        let definition: JSONValue
        if let number = sealed["q"]?.stringValue {
            if let query = context.parameters.get("query"), query != number { throw CompassError(.notFound, "No such result set for query \(query)") }
            definition = try await saved(number: number, context: context).definition
        } else {
            definition = sealed["q"] ?? .object([:])
        }
        return ResultSet(
            definition: try CompassQueryDef(json: definition), pageSize: sealed["n"]?.intValue ?? 100,
            maxRows: sealed["m"]?.intValue ?? Self.maxRows, count: sealed["c"] == .bool(true)
        )
    }

    /// Every row of a result set: one per record, or one per matching history entry when a history column is shown.
    private func rows(_ set: ResultSet, caller: Caller) async throws -> [(values: [String], displayName: String)] {
        let definition = set.definition
        let type = definition.recordType
        guard let table = store.catalog.table(type.table) else { return [] }
        let shown = definition.columns.filter(\.isShown)
        let resolved = shown.map { CompassQueryDef.resolve($0.path, in: type) }
        var fields = type.engineFields
        for case let (engine, nil)? in resolved where !engine.hasPrefix("history.") { fields.append(engine) }
        let query = try definition.encodedQuery(for: caller, catalog: store.catalog)
        let page = try await store.list(RecordQuery(table: type.table, query: query, fields: fields, limit: set.maxRows), caller: caller)
        let historyColumns = resolved.contains { $0?.engine.hasPrefix("history.") == true }
        // The history conditions of the top-level AND filters choose a record's entries.
        var historyClauses: [QueryClause] = []
        if historyColumns, case .node(true, let filters, _) = definition.filter {
            let history = filters.filter { $0.path.lowercased().hasPrefix("history.") }
            let stripped = CompassQueryDef(name: definition.name, recordType: type, columns: definition.columns, filter: .node(and: true, filters: history, children: []))
            for group in try stripped.encodedQuery(for: caller, catalog: store.catalog).groups {
                for clause in group.clauses {
                    historyClauses.append(QueryClause(clause.alternatives.map { term in
                        QueryCondition(String(term.field.dropFirst("history.".count)), term.op, term.value)
                    }))
                }
            }
        }
        var rows: [(values: [String], displayName: String)] = []
        for record in page.records {
            let values = records.compassValues(type, record: record, table: table)
            func row(_ entry: Record?) -> [String] {
                zip(shown, resolved).map { column, path in
                    guard let path else { return "" }
                    if path.engine.hasPrefix("history.") { return entry?[String(path.engine.dropFirst("history.".count))] ?? "" }
                    if let field = path.field, !column.path.contains(".") { return values[field.name] ?? "" }
                    return record[path.engine]
                }
            }
            if historyColumns {
                var entries = EncodedQuery(groups: [QueryGroup(clauses: historyClauses)]).and("document", .equals, record.sysID)
                entries.orderBy = [OrderTerm("sequence")]
                for entry in try await store.list(RecordQuery(table: "sys_wf_history", query: entries, limit: 1_000), caller: caller).records {
                    rows.append((row(entry), values["id"] ?? ""))
                }
            } else {
                rows.append((row(nil), values["id"] ?? ""))
            }
            if rows.count >= set.maxRows { break }
        }
        return Array(rows.prefix(set.maxRows))
    }

    private func page(_ request: Request, _ context: Context) async throws -> Response {
        let set = try await resultSet(context)
        let number = request.uri.queryParameters.get("pageNumber").flatMap { Int($0) } ?? 1
        guard number >= 1, number <= Self.maxRows else { throw CompassError(.badRequest, "pageNumber counts from 1") }
        let all = try await rows(set, caller: try records.caller(context))
        let start = min((number - 1).multipliedReportingOverflow(by: set.pageSize).partialValue, all.count)
        let slice = all[start..<min(start + set.pageSize, all.count)]
        var members: [(String, JSONValue)] = [
            ("rows", .array(slice.map { JSONValue(members: [("values", .array($0.values.map(JSONValue.string))), ("displayName", .string($0.displayName))]) })),
            ("pageNumber", .integer(number)), ("pageSize", .integer(set.pageSize)),
            ("columns", .array(set.definition.columns.filter(\.isShown).map {
                JSONValue(members: [("fieldPathName", .string($0.path)), ("label", .string($0.path))])
            })),
        ]
        if set.count { members.append(("totalNumberOfRows", .integer(all.count))) }
        return Response.json(JSONValue(members: members))
    }

    private func csv(_ request: Request, _ context: Context) async throws -> Response {
        guard (request.uri.queryParameters.get("fileType") ?? "csv").lowercased() == "csv" else {
            throw CompassError(.badRequest, "fileType must be csv")
        }
        let set = try await resultSet(context)
        func quoted(_ text: String) -> String { "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
        var lines = [set.definition.columns.filter(\.isShown).map { quoted($0.path) }.joined(separator: ",")]
        for row in try await rows(set, caller: try records.caller(context)) { lines.append(row.values.map(quoted).joined(separator: ",")) }
        return Response(
            status: .ok, headers: [.contentType: "text/csv; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: lines.joined(separator: "\r\n") + "\r\n"))
        )
    }
}
