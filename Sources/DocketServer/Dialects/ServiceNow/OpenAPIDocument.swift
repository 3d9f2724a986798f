import DocketModel
import Foundation
import Hummingbird
import OrderedCollections

/// `GET /api/docket/openapi.json`: an OpenAPI 3.1 description of the ServiceNow Table, Attachment, Aggregate, Batch
/// and My Work APIs and Docket's event stream, as this docketd serves them.
///
/// It cannot drift from the routes: it is made from the ServiceNow router's own list of routes, and every route
/// under a described API must have an entry in ``operations`` (``undescribed(_:)`` names those that do not; a test
/// fails on any). Each table of the catalog gets its own paths and schema, with its fields and their choices, so a
/// client generator sees real fields. Callers must be signed in, as for ServiceNow's REST API Explorer.
struct OpenAPIController: Sendable {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let configuration: Configuration
    let routes: [(method: String, path: String)]

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get("openapi.json") { request, context in
            _ = try context.requireCaller()
            let base = BaseURL.of(request, configuration: self.configuration)
            let document = OpenAPIDocument.build(
                routes: self.routes, catalog: self.store.catalog, server: base, maxPageSize: self.configuration.maxPageSize
            )
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: document.serialized()))
            )
        }
        return routes
    }
}

enum OpenAPIDocument {
    /// The APIs described; routes under other prefixes (GraphQL, notifications) are not.
    static let describedPrefixes = [
        "/api/now/table", "/api/now/v1/table", "/api/now/v2/table", "/api/now/attachment", "/api/now/v1/attachment",
        "/api/now/stats", "/api/now/v1/stats", "/api/now/batch", "/api/now/v1/batch", "/api/x_snc_my_work", "/api/docket/events",
        "/api/now/cmdb", "/api/now/tinyurl", "/api/sn_sc/servicecatalog", "/api/sn_chg_rest",
    ]

    /// One operation's words: summary, query parameters, whether it takes a JSON body, and what it answers.
    struct Operation {
        let summary: String
        var query: [(name: String, schema: JSONValue, description: String)] = []
        var body: JSONValue? = nil
        var result: JSONValue
        var status = 200
        var contentType = "application/json"
    }

    static let string: JSONValue = ["type": "string"]
    static let integer: JSONValue = ["type": "integer", "minimum": 0]
    static let boolean: JSONValue = ["type": "string", "enum": ["true", "false"]]
    static func ref(_ name: String) -> JSONValue { ["$ref": .string("#/components/schemas/" + name)] }
    static func result(_ schema: JSONValue) -> JSONValue {
        ["type": "object", "properties": ["result": schema], "required": ["result"]]
    }

    static let tableQuery: [(String, JSONValue, String)] = [
        ("sysparm_query", string, "An encoded query: field=value^ORfield2LIKEtext^ORDERBYfield"),
        ("sysparm_fields", string, "Comma-separated fields to return; dot-walks allowed (caller_id.email)"),
        ("sysparm_limit", integer, "Records per page (default 10000)"),
        ("sysparm_offset", integer, "Records to skip"),
        ("sysparm_display_value", ["type": "string", "enum": ["true", "false", "all"]], "Values, display values, or both"),
        ("sysparm_exclude_reference_link", boolean, "Leave out references' links"),
        ("sysparm_suppress_pagination_header", boolean, "Leave out the Link header"),
        ("sysparm_no_count", boolean, "Do not count the matching records (no X-Total-Count)"),
    ]
    static let recordQuery: [(String, JSONValue, String)] = [
        ("sysparm_fields", string, "Comma-separated fields to return"),
        ("sysparm_display_value", ["type": "string", "enum": ["true", "false", "all"]], "Values, display values, or both"),
        ("sysparm_exclude_reference_link", boolean, "Leave out references' links"),
    ]

    /// What each route does, by method and route pattern (as the router names it).
    static func operations(record: JSONValue, writable: JSONValue) -> [String: Operation] {
        var operations: [String: Operation] = [:]
        for base in ["/api/now/table", "/api/now/v1/table", "/api/now/v2/table"] {
            operations["GET \(base)/{table}"] = Operation(summary: "List records", query: tableQuery, result: result(["type": "array", "items": record]))
            operations["POST \(base)/{table}"] = Operation(
                summary: "Create a record", query: recordQuery, body: writable, result: result(record), status: 201
            )
            operations["GET \(base)/{table}/{sys_id}"] = Operation(summary: "Read a record", query: recordQuery, result: result(record))
            operations["PUT \(base)/{table}/{sys_id}"] = Operation(summary: "Update a record", query: recordQuery, body: writable, result: result(record))
            operations["PATCH \(base)/{table}/{sys_id}"] = Operation(summary: "Update a record", query: recordQuery, body: writable, result: result(record))
            operations["DELETE \(base)/{table}/{sys_id}"] = Operation(summary: "Delete a record", result: ["type": "null"], status: 204)
        }
        for base in ["/api/now/attachment", "/api/now/v1/attachment"] {
            let attachment = ref("sys_attachment")
            operations["GET \(base)"] = Operation(
                summary: "List attachments",
                query: [("sysparm_query", string, "An encoded query on sys_attachment"), ("sysparm_limit", integer, "Attachments per page")],
                result: result(["type": "array", "items": attachment])
            )
            operations["POST \(base)/file"] = Operation(
                summary: "Upload a file as the request body",
                query: [("table_name", string, "The record's table"), ("table_sys_id", string, "The record's sys_id"),
                        ("file_name", string, "The file's name")],
                body: ["type": "string", "contentMediaType": "application/octet-stream"], result: result(attachment), status: 201
            )
            operations["POST \(base)/upload"] = Operation(
                summary: "Upload a file as multipart/form-data (fields table_name, table_sys_id, then the file)",
                result: result(attachment), status: 201
            )
            operations["GET \(base)/{sys_id}"] = Operation(summary: "An attachment's metadata", result: result(attachment))
            operations["GET \(base)/{sys_id}/file"] = Operation(
                summary: "An attachment's content", result: ["type": "string", "contentMediaType": "application/octet-stream"],
                contentType: "application/octet-stream"
            )
            operations["DELETE \(base)/{sys_id}"] = Operation(summary: "Delete an attachment", result: ["type": "null"], status: 204)
        }
        for base in ["/api/now/stats", "/api/now/v1/stats"] {
            operations["GET \(base)/{table}"] = Operation(
                summary: "Aggregate records: count, sums, averages, minimums and maximums, grouped",
                query: [
                    ("sysparm_query", string, "An encoded query"), ("sysparm_count", boolean, "Count the records"),
                    ("sysparm_group_by", string, "Fields to group by"), ("sysparm_order_by", string, "Order of the groups"),
                    ("sysparm_having", string, "Conditions on aggregates"), ("sysparm_sum_fields", string, "Fields to sum"),
                    ("sysparm_avg_fields", string, "Fields to average"), ("sysparm_min_fields", string, "Fields' minimums"),
                    ("sysparm_max_fields", string, "Fields' maximums"), ("sysparm_display_value", boolean, "Group by display values"),
                ],
                result: result(["oneOf": [["type": "object"], ["type": "array", "items": ["type": "object"]]]])
            )
        }
        for base in ["/api/now/batch", "/api/now/v1/batch"] {
            operations["POST \(base)"] = Operation(
                summary: "Run several REST requests in one (bodies base64-encoded)",
                body: [
                    "type": "object", "required": ["rest_requests"],
                    "properties": [
                        "batch_request_id": string,
                        "rest_requests": ["type": "array", "items": [
                            "type": "object", "required": ["id", "method", "url"],
                            "properties": ["id": string, "method": string, "url": string, "body": string,
                                           "headers": ["type": "array", "items": ["type": "object"]]],
                        ]],
                    ],
                ],
                result: ["type": "object", "properties": ["batch_request_id": string, "serviced_requests": ["type": "array"],
                                                          "unserviced_requests": ["type": "array"]]]
            )
        }
        operations["GET /api/x_snc_my_work/v1/tracker/task"] = Operation(
            summary: "My Work: the caller's assigned tasks, grouped by type",
            query: [("sysparm_limit", integer, "Tasks to return")],
            result: result([
                "type": "object", "description": "Task type label → the caller's tasks of that type",
                "additionalProperties": ["type": "array", "items": [
                    "type": "object",
                    "properties": ["sys_id": string, "number": string, "short_desc": string, "created": string, "link": string,
                                   "snowui": string],
                ]],
            ])
        )
        operations["POST /api/x_snc_my_work/v1/tracker/task/{task_id}/comment"] = Operation(
            summary: "My Work: comment on a task", body: ["type": "object", "properties": ["comment": string], "required": ["comment"]],
            result: result(["type": "object"]), status: 201
        )
        let instance: JSONValue = result([
            "type": "object",
            "properties": ["attributes": ["type": "object"], "outbound_relations": ["type": "array"], "inbound_relations": ["type": "array"]],
        ])
        let ciBody: JSONValue = [
            "type": "object", "properties": ["attributes": ["type": "object"], "source": string,
                                             "outbound_relations": ["type": "array"], "inbound_relations": ["type": "array"]],
        ]
        let cmdb = "/api/now/cmdb/instance/{class}"
        operations["GET \(cmdb)"] = Operation(
            summary: "CMDB: configuration items of a class (sys_id and name)",
            query: [("sysparm_query", string, "An encoded query"), ("sysparm_limit", integer, "Items per page"),
                    ("sysparm_offset", integer, "Items to skip")],
            result: result(["type": "array", "items": ["type": "object"]])
        )
        operations["POST \(cmdb)"] = Operation(summary: "CMDB: create a configuration item", body: ciBody, result: instance, status: 201)
        operations["GET \(cmdb)/{sys_id}"] = Operation(summary: "CMDB: a configuration item with its relations", result: instance)
        operations["PUT \(cmdb)/{sys_id}"] = Operation(summary: "CMDB: update a configuration item", body: ciBody, result: instance)
        operations["PATCH \(cmdb)/{sys_id}"] = Operation(summary: "CMDB: update a configuration item", body: ciBody, result: instance)
        operations["POST \(cmdb)/{sys_id}/relation"] = Operation(
            summary: "CMDB: add relations ({type, target} in outbound_relations or inbound_relations)", body: ciBody, result: instance,
            status: 201
        )
        operations["DELETE \(cmdb)/{sys_id}/relation/{rel_sys_id}"] = Operation(
            summary: "CMDB: delete one of the item's relations", result: ["type": "null"], status: 204
        )
        operations["GET /api/now/cmdb/meta/{class}"] = Operation(
            summary: "CMDB: a class's label, parent, children and attributes", result: result(["type": "object"])
        )
        operations["POST /api/now/tinyurl"] = Operation(
            summary: "Keep a long URL's query; answers the path with ?sysparm_tiny=<token> to send instead",
            body: ["type": "object", "properties": ["url": string], "required": ["url"]], result: result(string)
        )
        let sc = "/api/sn_sc/servicecatalog"
        let scPaging: [(String, JSONValue, String)] = [
            ("sysparm_limit", integer, "Entries per page"), ("sysparm_offset", integer, "Entries to skip"),
            ("sysparm_text", string, "Words the entries contain"),
        ]
        let line: JSONValue = [
            "type": "object",
            "properties": ["sysparm_quantity": ["type": "integer"], "sysparm_requested_for": string, "variables": ["type": "object"]],
        ]
        let ordered: JSONValue = result([
            "type": "object", "properties": ["request_number": string, "request_id": string, "number": string, "sys_id": string,
                                             "table": string],
        ])
        operations["GET \(sc)/catalogs"] = Operation(summary: "Service catalog: catalogs", query: scPaging, result: result(["type": "array"]))
        operations["GET \(sc)/catalogs/{sys_id}"] = Operation(summary: "Service catalog: a catalog", result: result(["type": "object"]))
        operations["GET \(sc)/catalogs/{sys_id}/categories"] = Operation(
            summary: "Service catalog: a catalog's categories", query: scPaging, result: result(["type": "array"])
        )
        operations["GET \(sc)/categories/{sys_id}"] = Operation(summary: "Service catalog: a category", result: result(["type": "object"]))
        operations["GET \(sc)/items"] = Operation(
            summary: "Service catalog: items",
            query: scPaging + [("sysparm_catalog", string, "Only this catalog's"), ("sysparm_category", string, "Only this category's")],
            result: result(["type": "array"])
        )
        operations["GET \(sc)/items/{sys_id}"] = Operation(summary: "Service catalog: an item with its variables", result: result(["type": "object"]))
        operations["POST \(sc)/items/{sys_id}/order_now"] = Operation(
            summary: "Service catalog: order an item (a request, its requested item and task)", body: line, result: ordered
        )
        operations["POST \(sc)/items/{sys_id}/add_to_cart"] = Operation(
            summary: "Service catalog: add an item to the caller's cart", body: line, result: result(["type": "object"])
        )
        operations["GET \(sc)/cart"] = Operation(summary: "Service catalog: the caller's cart", result: result(["type": "object"]))
        operations["DELETE \(sc)/cart/{cart_item_id}"] = Operation(
            summary: "Service catalog: remove a line from the caller's cart", result: result(["type": "object"])
        )
        operations["POST \(sc)/cart/submit_order"] = Operation(summary: "Service catalog: order the cart", result: ordered)
        operations["POST \(sc)/cart/checkout"] = Operation(summary: "Service catalog: order the cart", result: ordered)
        let changeRecord = result(["type": "object", "description": "Every field as {value, display_value}"])
        let changeList = result(["type": "array", "items": ["type": "object"]])
        let changeQuery: [(String, JSONValue, String)] = [
            ("sysparm_query", string, "An encoded query"), ("sysparm_limit", integer, "Records per page"),
            ("sysparm_offset", integer, "Records to skip"),
        ]
        let fieldsBody: JSONValue = ["type": "object", "description": "Field values (also accepted as name-value query parameters)"]
        for base in ["/api/sn_chg_rest", "/api/sn_chg_rest/v1"] {
            let change = "\(base)/change"
            operations["GET \(change)"] = Operation(summary: "Change: list change requests", query: changeQuery, result: changeList)
            operations["POST \(change)"] = Operation(summary: "Change: create a change request", body: fieldsBody, result: changeRecord)
            for type in ["normal", "emergency", "standard"] {
                operations["GET \(change)/\(type)"] = Operation(summary: "Change: list \(type) changes", query: changeQuery, result: changeList)
                operations["GET \(change)/\(type)/{sys_id}"] = Operation(summary: "Change: a \(type) change", result: changeRecord)
                operations["PATCH \(change)/\(type)/{sys_id}"] = Operation(
                    summary: "Change: update a \(type) change", body: fieldsBody, result: changeRecord
                )
                operations["DELETE \(change)/\(type)/{sys_id}"] = Operation(
                    summary: "Change: delete a \(type) change", result: ["type": "null"], status: 204
                )
            }
            operations["POST \(change)/normal"] = Operation(summary: "Change: create a normal change", body: fieldsBody, result: changeRecord)
            operations["POST \(change)/emergency"] = Operation(
                summary: "Change: create an emergency change", body: fieldsBody, result: changeRecord
            )
            operations["GET \(change)/standard/template"] = Operation(
                summary: "Change: standard change templates", query: changeQuery, result: changeList
            )
            operations["POST \(change)/standard/{sys_id}"] = Operation(
                summary: "Change: create a standard change from a template (a version's or a template's sys_id)", body: fieldsBody,
                result: changeRecord
            )
            operations["GET \(change)/{sys_id}"] = Operation(summary: "Change: a change request", result: changeRecord)
            operations["PATCH \(change)/{sys_id}"] = Operation(summary: "Change: update a change request", body: fieldsBody, result: changeRecord)
            operations["DELETE \(change)/{sys_id}"] = Operation(summary: "Change: delete a change request", result: ["type": "null"], status: 204)
            operations["GET \(change)/{sys_id}/task"] = Operation(summary: "Change: a change's tasks", query: changeQuery, result: changeList)
            operations["POST \(change)/{sys_id}/task"] = Operation(summary: "Change: add a task", body: fieldsBody, result: changeRecord)
            operations["GET \(change)/{sys_id}/task/{task_id}"] = Operation(summary: "Change: one of a change's tasks", result: changeRecord)
            operations["PATCH \(change)/{sys_id}/task/{task_id}"] = Operation(
                summary: "Change: update one of a change's tasks", body: fieldsBody, result: changeRecord
            )
            operations["DELETE \(change)/{sys_id}/task/{task_id}"] = Operation(
                summary: "Change: delete one of a change's tasks", result: ["type": "null"], status: 204
            )
        }
        operations["GET /api/docket/events"] = Operation(
            summary: "Docket's live event stream (Server-Sent Events): each committed change the caller may see",
            query: [("table", string, "Only this table (and the tables extending it)"), ("query", string, "An encoded query the records match"),
                    ("since", integer, "Resume after this event sequence (or send Last-Event-ID)")],
            result: ["type": "string", "description": "text/event-stream: id, event (insert, update, delete, resync, heartbeat), data"],
            contentType: "text/event-stream"
        )
        return operations
    }

    /// Routes of a described API that have no description.
    static func undescribed(_ routes: [(method: String, path: String)]) -> [String] {
        let known = operations(record: ["type": "object"], writable: ["type": "object"])
        return routes.filter { route in
            route.method != "HEAD" && describedPrefixes.contains { route.path == $0 || route.path.hasPrefix($0 + "/") }
                && known["\(route.method) \(route.path)"] == nil
        }.map { "\($0.method) \($0.path)" }
    }

    /// A table's record as the Table API returns it (values as strings; with display values, objects).
    /// A field as the document describes it: its label, type and the table it references.
    static func describe(_ field: FieldDefinition) -> JSONValue {
        .string(field.label + " (" + field.type.rawValue + (field.reference.map { ", references " + $0 } ?? "") + ")")
    }

    static func recordSchema(_ table: SchemaCatalog.Table, catalog: SchemaCatalog) -> JSONValue {
        var properties: OrderedDictionary<String, JSONValue> = [:]
        for field in table.fields.sorted(by: { $0.name < $1.name }) where field.type != .password {
            var schema: OrderedDictionary<String, JSONValue> = [
                "description": describe(field),
                "anyOf": [string, ref("DisplayValue")],
            ]
            // The choices as values and labels; not an enum: display values are the labels, and a record may
            // hold a value its list does not (as on ServiceNow).
            if let choices = catalog.choices(for: field.name, in: table), !choices.isEmpty {
                schema["x-choices"] = .array(choices.map { ["value": .string($0.value), "label": .string($0.label)] })
            }
            if field.readOnly { schema["readOnly"] = true }
            properties[field.name] = .object(schema)
        }
        return ["type": "object", "title": .string(table.label), "properties": .object(properties)]
    }

    /// What a write to the table takes: each field a string, number, boolean or null (choices and references by
    /// value, or by display value with `sysparm_input_display_value`); unknown fields are ignored.
    static func inputSchema(_ table: SchemaCatalog.Table) -> JSONValue {
        var properties: OrderedDictionary<String, JSONValue> = [:]
        for field in table.fields.sorted(by: { $0.name < $1.name }) where !field.readOnly {
            properties[field.name] = [
                "type": ["string", "number", "boolean", "null"],
                "description": describe(field),
            ]
        }
        return ["type": "object", "title": .string(table.label + " (input)"), "properties": .object(properties)]
    }

    static func build(routes: [(method: String, path: String)], catalog: SchemaCatalog, server: String, maxPageSize: Int = 10_000) -> JSONValue {
        var schemas: OrderedDictionary<String, JSONValue> = [
            "DisplayValue": [
                "type": "object", "description": "A field with sysparm_display_value=all, or a reference with its link",
                "properties": ["display_value": string, "value": string, "link": string],
            ],
            "Error": [
                "type": "object",
                "properties": ["error": ["type": "object", "properties": ["message": string, "detail": ["type": ["string", "null"]]]],
                               "status": string],
            ],
        ]
        for table in catalog.tables {
            schemas[table.name] = recordSchema(table, catalog: catalog)
            schemas[table.name + "_input"] = inputSchema(table)
        }
        var paths: OrderedDictionary<String, JSONValue> = [:]
        let generic = operations(
            record: ["type": "object", "additionalProperties": true],
            writable: ["type": "object", "additionalProperties": ["type": ["string", "number", "boolean", "null"]]]
        )
        func add(_ method: String, _ path: String, _ operation: Operation, id: String, tag: String) {
            var parameters: [JSONValue] = []
            var cursor = path[...]
            while let open = cursor.firstIndex(of: "{"), let close = cursor[open...].firstIndex(of: "}") {
                let name = String(cursor[cursor.index(after: open)..<close])
                let schema: JSONValue = name == "table" ? ["type": "string", "enum": .array(catalog.tables.map { .string($0.name) })] : string
                parameters.append(["name": .string(name), "in": "path", "required": true, "schema": schema])
                cursor = cursor[cursor.index(after: close)...]
            }
            for (name, schema, description) in operation.query {
                let bounded: JSONValue = name == "sysparm_limit" ? ["type": "integer", "minimum": 0, "maximum": .integer(maxPageSize)] : schema
                parameters.append(["name": .string(name), "in": "query", "required": false, "schema": bounded, "description": .string(description)])
            }
            var entry: OrderedDictionary<String, JSONValue> = [
                "operationId": .string(id), "summary": .string(operation.summary), "tags": [.string(tag)],
                "parameters": .array(parameters),
            ]
            if let body = operation.body {
                let type = body["contentMediaType"] != nil ? "application/octet-stream" : "application/json"
                entry["requestBody"] = ["required": true, "content": [type: ["schema": body]]]
            }
            var responses: OrderedDictionary<String, JSONValue> = [:]
            responses[String(operation.status)] = operation.status == 204
                ? ["description": "Done"]
                : ["description": "Success", "content": [operation.contentType: ["schema": operation.result]]]
            for (code, text) in [("400", "The request is malformed"), ("401", "Not signed in"), ("403", "Not allowed"),
                                 ("404", "No such record or table"), ("429", "Too many requests"),
                                 ("503", "The database is unavailable; retry after Retry-After")] {
                responses[code] = ["description": .string(text), "content": ["application/json": ["schema": ref("Error")]]]
            }
            entry["responses"] = .object(responses)
            var item = paths[path]?.objectValue ?? [:]
            item[method.lowercased()] = .object(entry)
            paths[path] = .object(item)
        }
        func identifier(_ method: String, _ path: String) -> String {
            method.lowercased() + path.split(separator: "/").map { part in
                part.hasPrefix("{") ? "By" + part.dropFirst().dropLast().capitalized : part.capitalized
            }.joined().filter { $0.isLetter || $0.isNumber }
        }
        for route in routes where route.method != "HEAD" && describedPrefixes.contains(where: { route.path == $0 || route.path.hasPrefix($0 + "/") }) {
            guard let operation = generic["\(route.method) \(route.path)"] else { continue }
            let tag = route.path.split(separator: "/").dropFirst(2).first.map(String.init) ?? "api"
            add(route.method, route.path, operation, id: identifier(route.method, route.path), tag: tag)
        }
        // Each table on its own, with its schema: what client generators make types of.
        let canonical = routes.filter { $0.path.hasPrefix("/api/now/table/{table}") && $0.method != "HEAD" }
        for table in catalog.tables {
            let typed = operations(record: ref(table.name), writable: ref(table.name + "_input"))
            for route in canonical {
                guard let operation = typed["\(route.method) \(route.path)"] else { continue }
                let path = route.path.replacingOccurrences(of: "{table}", with: table.name)
                add(route.method, path, operation, id: identifier(route.method, path), tag: "table: " + table.name)
            }
        }
        return [
            "openapi": "3.1.0",
            "info": [
                "title": "Docket: ServiceNow-compatible REST APIs",
                "version": .string("schema \(SchemaStore.schemaVersion)"),
                "description": "The Table, Attachment, Aggregate, Batch and My Work APIs and Docket's event stream, as this docketd serves them. Every table of this instance has its own paths and schema.",
            ],
            "servers": [["url": .string(server)]],
            "security": [["basic": []], ["bearer": []]],
            "paths": .object(paths),
            "components": [
                "securitySchemes": [
                    "basic": ["type": "http", "scheme": "basic"],
                    "bearer": ["type": "http", "scheme": "bearer", "description": "An OAuth or OpenID access token"],
                ],
                "schemas": .object(schemas),
            ],
        ]
    }
}
