import DocketModel
import Foundation
import Hummingbird
import OrderedCollections

/// The CMDB Instance API (`/api/now/cmdb/instance/{class}`) and the CMDB Meta API (`/api/now/cmdb/meta/{class}`):
/// configuration items of a class of the `cmdb_ci` hierarchy with their relationships (`cmdb_rel_ci`), read and
/// written through the engine like the Table API's records. A CI is answered as `attributes` (its fields) with its
/// `outbound_relations` (where it is the parent) and `inbound_relations` (where it is the child).
struct CMDBController {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let configuration: Configuration

    var instanceEndpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get(":class", use: list)
        routes.post(":class", use: create)
        routes.get(":class/:sys_id", use: read)
        routes.put(":class/:sys_id", use: update)
        routes.patch(":class/:sys_id", use: update)
        routes.post(":class/:sys_id/relation", use: addRelations)
        routes.delete(":class/:sys_id/relation/:rel_sys_id", use: deleteRelation)
        return routes
    }

    var metaEndpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get(":class", use: meta)
        return routes
    }

    /// Relationships added in one request, at most.
    static let maxRelations = 100

    // MARK: Instances

    @Sendable func list(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let table = try ciClass(context)
        let parameters = FormQuery.parse(request.uri.query)
        func parameter(_ name: String) -> String? { parameters.first { $0.0 == name }?.1 }
        let query: EncodedQuery
        do {
            query = try EncodedQuery(parameter("sysparm_query") ?? "")
        } catch {
            throw ServiceNowError.badRequest("Invalid query", detail: error.description)
        }
        let limit = min(max(Int(parameter("sysparm_limit") ?? "") ?? 1000, 1), configuration.maxPageSize)
        let offset = max(Int(parameter("sysparm_offset") ?? "") ?? 0, 0)
        let page = try await store.list(
            RecordQuery(table: table.name, query: query, fields: ["sys_id", "name"], limit: limit, offset: offset, count: true),
            caller: caller
        )
        let items: [JSONValue] = page.records.map { record in
            .object(["sys_id": .string(record.values["sys_id"] ?? ""), "name": .string(record.values["name"] ?? "")])
        }
        var response = Response.json(.object(["result": .array(items)]))
        if let total = page.total { response.headers[.xTotalCount] = String(total) }
        return response
    }

    @Sendable func read(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let table = try ciClass(context)
        let sysID = try context.parameters.require("sys_id")
        return Response.json(.object(["result": try await instance(sysID, table: table, request: request, caller: caller)]))
    }

    /// `{"attributes": {…}, "source": "…", "inbound_relations": […], "outbound_relations": […]}`: a new CI of the
    /// class (its `discovery_source` is the source), then its relationships.
    @Sendable func create(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let table = try ciClass(context)
        let body = try await RequestBody.json(from: request, context: context)
        var values = try attributes(of: body, required: true)
        if let source = body["source"]?.stringValue, !source.isEmpty, values["discovery_source"] == nil {
            values["discovery_source"] = source
        }
        values["sys_class_name"] = nil
        let relations = try await resolved(try relationWrites(of: body), caller: caller)
        let sysID = try await store.insert(into: table.name, values: values, caller: caller)
        try await addRelations(relations, to: sysID, caller: caller)
        return Response.json(
            .object(["result": try await instance(sysID, table: table, request: request, caller: caller)]), status: .created
        )
    }

    /// `{"attributes": {…}, "source": "…"}`: changes the CI's fields (its class stays what it is).
    @Sendable func update(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let table = try ciClass(context)
        let sysID = try context.parameters.require("sys_id")
        let body = try await RequestBody.json(from: request, context: context)
        var values = try attributes(of: body, required: true)
        values["sys_class_name"] = nil
        // The CI must be of this class (or one extending it): read it first, as the caller may see it.
        _ = try await store.get(sysID, in: table.name, fields: ["sys_id"], caller: caller)
        let relations = try await resolved(try relationWrites(of: body), caller: caller)
        if !values.isEmpty { try await store.update(sysID, in: table.name, values: values, caller: caller) }
        try await addRelations(relations, to: sysID, caller: caller)
        return Response.json(.object(["result": try await instance(sysID, table: table, request: request, caller: caller)]))
    }

    /// `{"outbound_relations": [{"type", "target"}], "inbound_relations": […]}`: new relationships of the CI.
    @Sendable func addRelations(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let table = try ciClass(context)
        let sysID = try context.parameters.require("sys_id")
        let body = try await RequestBody.json(from: request, context: context)
        let relations = try await resolved(try relationWrites(of: body), caller: caller)
        guard !relations.isEmpty else {
            throw ServiceNowError.badRequest(
                "Invalid relations", detail: "Give inbound_relations or outbound_relations, each a list of {type, target}"
            )
        }
        _ = try await store.get(sysID, in: table.name, fields: ["sys_id"], caller: caller)
        try await addRelations(relations, to: sysID, caller: caller)
        return Response.json(
            .object(["result": try await instance(sysID, table: table, request: request, caller: caller)]), status: .created
        )
    }

    /// Deletes one of the CI's relationships (it must be the CI's, inbound or outbound).
    @Sendable func deleteRelation(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let table = try ciClass(context)
        let sysID = try context.parameters.require("sys_id")
        let relationID = try context.parameters.require("rel_sys_id")
        _ = try await store.get(sysID, in: table.name, fields: ["sys_id"], caller: caller)
        let relation = try await store.get(relationID, in: "cmdb_rel_ci", fields: ["parent", "child"], caller: caller).record
        guard relation.values["parent"] == sysID || relation.values["child"] == sysID else {
            throw ServiceNowError(.notFound, "No Record found", detail: "The relationship \(relationID) is not one of \(sysID)'s")
        }
        try await store.delete(relationID, from: "cmdb_rel_ci", caller: caller)
        return Response(status: .noContent)
    }

    // MARK: Meta

    /// A class's description: its label, parent and children, and its attributes (fields) with their types.
    @Sendable func meta(_ request: Request, context: Context) async throws -> Response {
        _ = try context.requireCaller()
        let table = try ciClass(context)
        let catalog = store.catalog
        let attributes: [JSONValue] = table.fields.sorted { $0.name < $1.name }.map { field in
            var object: OrderedDictionary<String, JSONValue> = [
                "element": .string(field.name), "label": .string(field.label), "type": .string(field.type.rawValue),
                "max_length": .string(String(field.maxLength)), "is_mandatory": .string(field.mandatory ? "true" : "false"),
                "is_read_only": .string(field.readOnly ? "true" : "false"), "is_display": .string(field.isDisplay ? "true" : "false"),
            ]
            if let reference = field.reference { object["reference"] = .string(reference) }
            if let choices = catalog.choices(for: field.name, in: table), !choices.isEmpty {
                object["choices"] = .array(choices.map { .object(["value": .string($0.value), "label": .string($0.label)]) })
            }
            return .object(object)
        }
        let children = table.descendants.filter { catalog.table($0)?.definition.parent == table.name }.sorted()
        let result: JSONValue = .object([
            "name": .string(table.name), "label": .string(table.label),
            "parent": .string(table.definition.parent ?? ""), "children": .array(children.map(JSONValue.string)),
            "attributes": .array(attributes),
        ])
        return Response.json(.object(["result": result]))
    }

    // MARK: Helpers

    /// The class named in the path: `cmdb_ci` or a table extending it.
    private func ciClass(_ context: Context) throws -> SchemaCatalog.Table {
        let name = try context.parameters.require("class")
        guard let table = store.catalog.table(name), table.ancestry.contains("cmdb_ci") else {
            throw ServiceNowError.badRequest("Invalid class", detail: "\(name.prefix(100)) is not a CMDB class (cmdb_ci or a table extending it)")
        }
        return table
    }

    private func attributes(of body: JSONValue, required: Bool) throws -> [String: String] {
        guard case .object = body else {
            throw ServiceNowError.badRequest("Exception while reading request", detail: "The payload must be a JSON object.")
        }
        guard let attributes = body["attributes"] else {
            if required, body["inbound_relations"] == nil, body["outbound_relations"] == nil {
                throw ServiceNowError.badRequest("Invalid payload", detail: "attributes is required: an object of the CI's fields")
            }
            return [:]
        }
        return try RequestBody.values(of: attributes)
    }

    /// A relationship to write: its type (a cmdb_rel_type sys_id or name), and the other CI, as parent or child.
    struct RelationWrite {
        var type: String
        var target: String
        var outbound: Bool
    }

    private func relationWrites(of body: JSONValue) throws -> [RelationWrite] {
        var writes: [RelationWrite] = []
        for (key, outbound) in [("outbound_relations", true), ("inbound_relations", false)] {
            guard let list = body[key] else { continue }
            guard let items = list.arrayValue else {
                throw ServiceNowError.badRequest("Invalid relations", detail: "\(key) must be a list of {type, target}")
            }
            for item in items {
                guard let type = item["type"]?.stringValue ?? item["type"]?["value"]?.stringValue, !type.isEmpty,
                    let target = item["target"]?.stringValue ?? item["target"]?["value"]?.stringValue, !target.isEmpty
                else {
                    throw ServiceNowError.badRequest("Invalid relations", detail: "Each of \(key) needs a type and a target")
                }
                writes.append(RelationWrite(type: type, target: target, outbound: outbound))
            }
        }
        guard writes.count <= Self.maxRelations else {
            throw ServiceNowError.badRequest("Too many relations", detail: "At most \(Self.maxRelations) relations per request")
        }
        return writes
    }

    /// Relationship writes checked before anything is written: each other CI one the caller may read, each type one
    /// that exists (by sys_id or name), as its sys_id.
    private func resolved(_ writes: [RelationWrite], caller: Caller) async throws -> [RelationWrite] {
        var result: [RelationWrite] = []
        for var write in writes {
            _ = try await store.get(write.target, in: "cmdb_ci", fields: ["sys_id"], caller: caller)
            let types = try await store.list(
                RecordQuery(table: "cmdb_rel_type", query: EncodedQuery(all: [QueryCondition("name", .equals, write.type)]),
                            fields: ["sys_id", "name"], limit: 2, count: false),
                caller: caller
            ).records
            if let byName = types.first(where: { $0.values["name"] == write.type }) ?? (types.count == 1 ? types.first : nil) {
                write.type = byName.values["sys_id"] ?? write.type
            } else {
                do {
                    _ = try await store.get(write.type, in: "cmdb_rel_type", fields: ["sys_id"], caller: caller)
                } catch let error as EngineError where error.code == .notFound {
                    throw ServiceNowError.badRequest("Invalid relation type", detail: "No relationship type \(write.type.prefix(100))")
                }
            }
            result.append(write)
        }
        return result
    }

    private func addRelations(_ writes: [RelationWrite], to sysID: String, caller: Caller) async throws {
        for write in writes {
            try await store.insert(into: "cmdb_rel_ci", values: [
                "parent": write.outbound ? sysID : write.target, "child": write.outbound ? write.target : sysID,
                "type": write.type,
            ], caller: caller)
        }
    }

    /// The CI as the API answers it.
    private func instance(_ sysID: String, table: SchemaCatalog.Table, request: Request, caller: Caller) async throws -> JSONValue {
        let baseURL = BaseURL.of(request, configuration: configuration)
        let (columns, record) = try await store.get(sysID, in: table.name, caller: caller)
        let attributes = try await render([record], columns: columns, mode: .value, baseURL: baseURL, caller: caller).first ?? .object([:])
        var relations: [String: [JSONValue]] = [:]
        for (key, own, other) in [("outbound_relations", "parent", "child"), ("inbound_relations", "child", "parent")] {
            let page = try await store.list(
                RecordQuery(
                    table: "cmdb_rel_ci", query: try EncodedQuery("\(own)=\(sysID)"), fields: ["sys_id", "type", other],
                    limit: 1000, count: false
                ),
                caller: caller
            )
            let rendered = try await render(page.records, columns: page.columns, mode: .all, baseURL: baseURL, caller: caller)
            relations[key] = rendered.map { relation in
                func part(_ name: String) -> JSONValue {
                    .object([
                        "display_value": relation[name]?["display_value"] ?? .string(""),
                        "link": relation[name]?["link"] ?? .string(""),
                        "value": relation[name]?["value"] ?? .string(""),
                    ])
                }
                return .object([
                    "sys_id": relation["sys_id"]?["value"] ?? relation["sys_id"] ?? .string(""),
                    "type": part("type"), "target": part(other),
                ])
            }
        }
        return .object([
            "attributes": attributes, "outbound_relations": .array(relations["outbound_relations"] ?? []),
            "inbound_relations": .array(relations["inbound_relations"] ?? []),
        ])
    }

    private func render(
        _ records: [Record], columns: [ResultColumn], mode: DisplayMode, baseURL: String, caller: Caller
    ) async throws -> [JSONValue] {
        guard !records.isEmpty else { return [] }
        let page = RecordPage(columns: columns, records: records, total: nil)
        let data = try await store.displayData(for: page, displayValues: mode != .value, caller: caller)
        let renderer = RecordRenderer(
            catalog: store.catalog, mode: mode, excludeReferenceLink: false, baseURL: baseURL, data: data,
            timeZone: caller.timeZone
        )
        return try records.map { record in
            var writer = JSONWriter(capacity: 2048)
            renderer.write(record, columns: columns, to: &writer)
            return try JSONValue.parse(writer.bytes)
        }
    }
}
