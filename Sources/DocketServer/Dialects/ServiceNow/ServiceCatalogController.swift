import DocketModel
import Foundation
import Hummingbird
import OrderedCollections

/// The Service Catalog API (`/api/sn_sc/servicecatalog`): catalogs, categories and items as the caller may see them,
/// ordering an item at once (`order_now`) or through the caller's cart (`add_to_cart`, `cart`, `submit_order`,
/// `checkout`). Orders are placed by ``ServiceCatalog`` in the engine; carts are records of `sc_cart` and
/// `sc_cart_item`, each the caller's own.
struct ServiceCatalogController {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let configuration: Configuration
    var catalog: ServiceCatalog { ServiceCatalog(store: store) }

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get("catalogs", use: catalogs)
        routes.get("catalogs/:sys_id", use: catalogRecord)
        routes.get("catalogs/:sys_id/categories", use: categories)
        routes.get("categories/:sys_id", use: categoryRecord)
        routes.get("items", use: items)
        routes.get("items/:sys_id", use: item)
        routes.post("items/:sys_id/order_now", use: orderNow)
        routes.post("items/:sys_id/add_to_cart", use: addToCart)
        routes.get("cart", use: cart)
        routes.delete("cart/:cart_item_id", use: removeFromCart)
        routes.post("cart/submit_order", use: submitOrder)
        routes.post("cart/checkout", use: submitOrder)
        return routes
    }

    // MARK: Browsing

    @Sendable func catalogs(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let paging = Paging(request, maxPageSize: configuration.maxPageSize)
        var query = "active=true"
        if let text = paging.text { query += "^titleLIKE\(text)^ORdescriptionLIKE\(text)" }
        let page = try await list("sc_catalog", query + "^ORDERBYtitle", paging: paging, caller: caller)
        var result: [JSONValue] = []
        for record in page.records { result.append(try await catalogJSON(record, caller: caller, categories: false)) }
        return listResponse(result, total: page.total)
    }

    @Sendable func catalogRecord(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let record = try await store.get(try context.parameters.require("sys_id"), in: "sc_catalog", caller: caller).record
        return Response.json(.object(["result": try await catalogJSON(record, caller: caller, categories: true)]))
    }

    @Sendable func categories(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let catalogID = try context.parameters.require("sys_id")
        _ = try await store.get(catalogID, in: "sc_catalog", fields: ["sys_id"], caller: caller)
        let paging = Paging(request, maxPageSize: configuration.maxPageSize)
        var query = "sc_catalog=\(catalogID)^active=true"
        if paging.parameter("sysparm_top_level_only")?.lowercased() == "true" { query += "^parentISEMPTY" }
        let page = try await list("sc_category", query + "^ORDERBYorder^ORDERBYtitle", paging: paging, caller: caller)
        var result: [JSONValue] = []
        for record in page.records { result.append(try await categoryJSON(record, caller: caller)) }
        return listResponse(result, total: page.total)
    }

    @Sendable func categoryRecord(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let record = try await store.get(try context.parameters.require("sys_id"), in: "sc_category", caller: caller).record
        return Response.json(.object(["result": try await categoryJSON(record, caller: caller)]))
    }

    @Sendable func items(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let paging = Paging(request, maxPageSize: configuration.maxPageSize)
        var query = "active=true"
        for (parameter, field) in [("sysparm_catalog", "sc_catalogs"), ("sysparm_category", "category")] {
            guard let value = paging.parameter(parameter), !value.isEmpty else { continue }
            guard SysID.isValid(value) else {
                throw ServiceNowError.badRequest("Invalid \(parameter)", detail: "\(parameter) is a sys_id")
            }
            query += field == "sc_catalogs" ? "^sc_catalogsLIKE\(value)" : "^category=\(value)"
        }
        if let text = paging.text { query += "^nameLIKE\(text)^ORshort_descriptionLIKE\(text)" }
        let page = try await list("sc_cat_item", query + "^ORDERBYorder^ORDERBYname", paging: paging, caller: caller)
        var result: [JSONValue] = []
        for record in page.records { result.append(try await itemJSON(record, caller: caller, variables: false)) }
        return listResponse(result, total: page.total)
    }

    @Sendable func item(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let record = try await store.get(try context.parameters.require("sys_id"), in: "sc_cat_item", caller: caller).record
        return Response.json(.object(["result": try await itemJSON(record, caller: caller, variables: true)]))
    }

    // MARK: Ordering

    @Sendable func orderNow(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let line = try await self.line(request, context: context)
        let order = try await catalog.order([line], caller: caller)
        return Response.json(.object(["result": orderJSON(order)]))
    }

    @Sendable func addToCart(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let line = try await self.line(request, context: context)
        _ = try await catalog.check(line, caller: caller)
        let requestedFor = try await catalog.user(line.requestedFor, caller: caller)
        let cartID = try await cartID(of: caller, create: true) ?? ""
        guard try await cartLines(cartID, caller: caller).count < ServiceCatalog.maxLines else {
            throw ServiceNowError.badRequest("Cart full", detail: "A cart holds at most \(ServiceCatalog.maxLines) lines")
        }
        let variables = JSONValue.object(OrderedDictionary(uniqueKeysWithValues: line.variables.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.string($0.value)) }))
        try await store.insert(into: "sc_cart_item", values: [
            "cart": cartID, "user": caller.userID, "cat_item": line.item, "quantity": String(line.quantity), "requested_for": requestedFor,
            "variables": String(decoding: variables.serialized(), as: UTF8.self),
        ], caller: caller)
        return Response.json(.object(["result": try await cartJSON(caller: caller)]))
    }

    @Sendable func cart(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        return Response.json(.object(["result": try await cartJSON(caller: caller)]))
    }

    @Sendable func removeFromCart(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let id = try context.parameters.require("cart_item_id")
        // Only a line of the caller's own cart: others' are not found.
        guard let cartID = try await cartID(of: caller, create: false) else { throw EngineError.notFound(table: "sc_cart_item", sysID: id) }
        let line = try await store.get(id, in: "sc_cart_item", fields: ["cart"], caller: caller).record
        guard line.values["cart"] == cartID else { throw EngineError.notFound(table: "sc_cart_item", sysID: id) }
        try await store.delete(id, from: "sc_cart_item", caller: caller)
        return Response.json(.object(["result": try await cartJSON(caller: caller)]))
    }

    /// Orders what is in the caller's cart, and empties it.
    @Sendable func submitOrder(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        guard let cartID = try await cartID(of: caller, create: false) else {
            throw ServiceNowError.badRequest("Cart is empty", detail: "Add items to the cart before ordering")
        }
        let lines = try await cartLines(cartID, caller: caller)
        guard !lines.isEmpty else { throw ServiceNowError.badRequest("Cart is empty", detail: "Add items to the cart before ordering") }
        guard lines.count <= ServiceCatalog.maxLines else {
            throw ServiceNowError.badRequest("Cart too large", detail: "A cart is ordered with at most \(ServiceCatalog.maxLines) lines")
        }
        // Each line is claimed first, at the version read: of two submissions at once, one orders it, the other is
        // told the cart changed. A failed order gives the lines back.
        var claimed: [String] = []
        do {
            for line in lines {
                var options = WriteOptions()
                options.expectedModCount = line.version
                try await store.update(line.id, in: "sc_cart_item", values: ["active": "false"], caller: caller, options: options)
                claimed.append(line.id)
            }
        } catch let error as EngineError where error.code == .conflict {
            try await release(claimed, caller: caller)
            throw ServiceNowError(.conflict, "Cart changed", detail: "The cart was changed or ordered by another request; look at it again")
        }
        let order: ServiceCatalog.Order
        do {
            order = try await catalog.order(lines.map(\.line), caller: caller)
        } catch {
            try await release(claimed, caller: caller)
            throw error
        }
        // Ordered: the claimed lines are done with (a line left behind is inactive and never ordered again).
        for id in claimed { try await store.delete(id, from: "sc_cart_item", caller: caller) }
        return Response.json(.object(["result": orderJSON(order)]))
    }

    // MARK: Helpers

    /// Gives claimed cart lines back (an order that failed).
    private func release(_ ids: [String], caller: Caller) async throws {
        for id in ids { try await store.update(id, in: "sc_cart_item", values: ["active": "true"], caller: caller) }
    }

    /// A record the caller may see, or nil when there is none (or it is hidden); a failure to read is thrown.
    private func visible(_ sysID: String, in table: String, fields: [String], caller: Caller) async throws -> Record? {
        do {
            return try await store.get(sysID, in: table, fields: fields, caller: caller).record
        } catch let error as EngineError where error.code == .notFound {
            return nil
        }
    }

    struct Paging {
        let parameters: [(String, String)]
        let limit: Int
        let offset: Int

        init(_ request: Request, maxPageSize: Int) {
            parameters = FormQuery.parse(request.uri.query)
            let limit = parameters.first { $0.0 == "sysparm_limit" }.flatMap { Int($0.1) } ?? 100
            self.limit = min(max(limit, 1), maxPageSize)
            offset = max(parameters.first { $0.0 == "sysparm_offset" }.flatMap { Int($0.1) } ?? 0, 0)
        }

        func parameter(_ name: String) -> String? { parameters.first { $0.0 == name }?.1 }

        /// `sysparm_text`, without characters that would end an encoded query's term.
        var text: String? {
            guard let text = parameter("sysparm_text")?.replacingOccurrences(of: "^", with: " "), !text.isEmpty else { return nil }
            return String(text.prefix(200))
        }
    }

    private func list(_ table: String, _ query: String, paging: Paging, caller: Caller) async throws -> RecordPage {
        try await store.list(
            RecordQuery(table: table, query: try EncodedQuery(query), limit: paging.limit, offset: paging.offset, count: true),
            caller: caller
        )
    }

    private func listResponse(_ result: [JSONValue], total: Int?) -> Response {
        var response = Response.json(.object(["result": .array(result)]))
        if let total { response.headers[.xTotalCount] = String(total) }
        return response
    }

    private func count(_ table: String, _ query: String, caller: Caller) async throws -> Int {
        try await store.list(RecordQuery(table: table, query: try EncodedQuery(query), fields: ["sys_id"], limit: 1, count: true), caller: caller).total ?? 0
    }

    private func catalogJSON(_ record: Record, caller: Caller, categories: Bool) async throws -> JSONValue {
        let id = record.values["sys_id"] ?? ""
        var object: OrderedDictionary<String, JSONValue> = [
            "sys_id": .string(id), "title": .string(record.values["title"] ?? ""),
            "description": .string(record.values["description"] ?? ""),
            "has_categories": .bool(try await count("sc_category", "sc_catalog=\(id)^active=true", caller: caller) > 0),
            "has_items": .bool(try await count("sc_cat_item", "sc_catalogsLIKE\(id)^active=true", caller: caller) > 0),
        ]
        if categories {
            let page = try await store.list(
                RecordQuery(table: "sc_category", query: try EncodedQuery("sc_catalog=\(id)^active=true^ORDERBYorder"),
                            fields: ["sys_id", "title"], limit: 1000, count: false),
                caller: caller
            )
            object["categories"] = .array(page.records.map {
                .object(["sys_id": .string($0.values["sys_id"] ?? ""), "title": .string($0.values["title"] ?? "")])
            })
        }
        return .object(object)
    }

    private func categoryJSON(_ record: Record, caller: Caller) async throws -> JSONValue {
        let id = record.values["sys_id"] ?? ""
        let children = try await store.list(
            RecordQuery(table: "sc_category", query: try EncodedQuery("parent=\(id)^active=true^ORDERBYorder"),
                        fields: ["sys_id", "title"], limit: 1000, count: false),
            caller: caller
        )
        return .object([
            "sys_id": .string(id), "title": .string(record.values["title"] ?? ""),
            "description": .string(record.values["description"] ?? ""),
            "full_description": .string(record.values["full_description"] ?? ""),
            "subcategories": .array(children.records.map {
                .object(["sys_id": .string($0.values["sys_id"] ?? ""), "title": .string($0.values["title"] ?? "")])
            }),
        ])
    }

    private func itemJSON(_ record: Record, caller: Caller, variables: Bool) async throws -> JSONValue {
        let id = record.values["sys_id"] ?? ""
        var catalogs: [JSONValue] = []
        for catalogID in (record.values["sc_catalogs"] ?? "").split(separator: ",").map(String.init) where SysID.isValid(catalogID) {
            guard let title = try await visible(catalogID, in: "sc_catalog", fields: ["title"], caller: caller)?.values["title"]
            else { continue }
            catalogs.append(.object(["sys_id": .string(catalogID), "title": .string(title)]))
        }
        var category: JSONValue = .object([:])
        if let categoryID = record.values["category"], !categoryID.isEmpty,
            let title = try await visible(categoryID, in: "sc_category", fields: ["title"], caller: caller)?.values["title"]
        {
            category = .object(["sys_id": .string(categoryID), "title": .string(title)])
        }
        var object: OrderedDictionary<String, JSONValue> = [
            "sys_id": .string(id), "name": .string(record.values["name"] ?? ""),
            "short_description": .string(record.values["short_description"] ?? ""),
            "description": .string(record.values["description"] ?? ""),
            "availability": .string(record.values["availability"] ?? ""),
            "mandatory_attachment": .bool(record.values["mandatory_attachment"] == "true"),
            "request_method": .string(""), "type": .string(record.values["type"] ?? "item"),
            "sys_class_name": .string(record.values["sys_class_name"] ?? "sc_cat_item"),
            "catalogs": .array(catalogs), "category": category, "order": .integer(Int(record.values["order"] ?? "") ?? 0),
            "price": .string(record.values["price"] ?? ""),
        ]
        if variables {
            let page = try await store.list(
                RecordQuery(table: "item_option_new", query: try EncodedQuery("cat_item=\(id)^active=true^ORDERBYorder"),
                            limit: 200, count: false),
                caller: caller
            )
            object["variables"] = .array(page.records.map { variable in
                .object([
                    "name": .string(variable.values["name"] ?? ""), "label": .string(variable.values["question_text"] ?? ""),
                    "type": .integer(Int(variable.values["type"] ?? "") ?? 6),
                    "mandatory": .bool(variable.values["mandatory"] == "true"),
                    "displayvalue": .string(variable.values["default_value"] ?? ""),
                    "value": .string(variable.values["default_value"] ?? ""),
                    "help_text": .string(variable.values["help_text"] ?? ""), "id": .string(variable.values["sys_id"] ?? ""),
                ])
            })
        }
        return .object(object)
    }

    /// The order line a request's body describes: `sysparm_quantity`, `sysparm_requested_for`, `variables`.
    private func line(_ request: Request, context: Context) async throws -> ServiceCatalog.Line {
        let itemID = try context.parameters.require("sys_id")
        let body = try await RequestBody.json(from: request, context: context)
        guard case .object = body else {
            throw ServiceNowError.badRequest("Exception while reading request", detail: "The payload must be a JSON object.")
        }
        let quantityValue = body["sysparm_quantity"]
        let quantity: Int?
        switch quantityValue {
        case nil, .null?: quantity = 1
        case .integer(let number)?: quantity = Int(exactly: number)
        case .string(let text)?: quantity = Int(text)
        default: quantity = nil
        }
        guard let quantity else {
            throw ServiceNowError.badRequest("Invalid quantity", detail: "sysparm_quantity must be a whole number")
        }
        let variables = try body["variables"].map { try RequestBody.values(of: $0) } ?? [:]
        return ServiceCatalog.Line(
            item: itemID, quantity: quantity, requestedFor: body["sysparm_requested_for"]?.stringValue ?? "", variables: variables
        )
    }

    private func orderJSON(_ order: ServiceCatalog.Order) -> JSONValue {
        .object([
            "sys_id": .string(order.requestID), "number": .string(order.requestNumber),
            "request_number": .string(order.requestNumber), "request_id": .string(order.requestID),
            "table": .string("sc_request"),
        ])
    }

    /// The caller's cart, made when `create` and it has none.
    private func cartID(of caller: Caller, create: Bool) async throws -> String? {
        let page = try await store.list(
            RecordQuery(table: "sc_cart", query: try EncodedQuery("user=\(caller.userID)^name=DEFAULT"), fields: ["sys_id"], limit: 1, count: false),
            caller: caller
        )
        if let id = page.records.first?.values["sys_id"] { return id }
        guard create else { return nil }
        return try await store.insert(into: "sc_cart", values: ["user": caller.userID, "name": "DEFAULT"], caller: caller)
    }

    /// The caller's cart lines (theirs by `user`, whichever of their carts holds them), oldest first.
    private func cartLines(_ cartID: String, caller: Caller) async throws -> [(id: String, version: Int, line: ServiceCatalog.Line)] {
        let page = try await store.list(
            RecordQuery(table: "sc_cart_item", query: EncodedQuery(all: [
                QueryCondition("user", .equals, caller.userID), QueryCondition("active", .equals, "true"),
            ]), fields: ["sys_id", "sys_mod_count", "cat_item", "quantity", "requested_for", "variables"],
            limit: ServiceCatalog.maxLines + 1, count: false),
            caller: caller
        )
        return try page.records.map { record in
            guard let answers = try JSONValue.parse(Array((record.values["variables"] ?? "{}").utf8)).objectValue else {
                throw EngineError.badRequest("Invalid cart", detail: "A cart line's variables are not an object")
            }
            return (record.values["sys_id"] ?? "", Int(record.values["sys_mod_count"] ?? "") ?? 0, ServiceCatalog.Line(
                item: record.values["cat_item"] ?? "", quantity: Int(record.values["quantity"] ?? "") ?? 1,
                requestedFor: record.values["requested_for"] ?? "",
                variables: try RequestBody.values(of: .object(answers))
            ))
        }
    }

    private func cartJSON(caller: Caller) async throws -> JSONValue {
        guard let cartID = try await cartID(of: caller, create: false) else {
            return .object(["cart_id": .string(""), "items": .array([]), "subtotal": .string("0")])
        }
        let lines = try await cartLines(cartID, caller: caller)
        var items: [JSONValue] = []
        var subtotal = 0.0
        for (id, _, line) in lines {
            let item = try await visible(line.item, in: "sc_cat_item", fields: ["name", "price"], caller: caller)
            let price = Double(item?.values["price"] ?? "") ?? 0
            subtotal += price * Double(line.quantity)
            items.append(.object([
                "cart_item_id": .string(id), "catalog_item_id": .string(line.item),
                "item_name": .string(item?.values["name"] ?? ""), "quantity": .integer(line.quantity),
                "price": .string(item?.values["price"] ?? ""), "requested_for": .string(line.requestedFor),
            ]))
        }
        return .object(["cart_id": .string(cartID), "items": .array(items), "subtotal": .string(String(subtotal))])
    }
}
