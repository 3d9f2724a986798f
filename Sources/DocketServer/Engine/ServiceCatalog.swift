import DocketModel
import Foundation

/// Ordering from the service catalog, as an instance does it: an order (one item now, or a cart's lines) becomes a
/// request (`sc_request`), a requested item per line (`sc_req_item`) with the answers to the item's variables
/// (`sc_item_option`, linked by `sc_item_option_mtom`), and a catalog task per requested item (`sc_task`) for the
/// item's fulfilment group. The records are written by the engine on the caller's behalf (the caller needs no rights
/// on these tables: ordering is what a catalog user may do; the writes are the caller's in `sys_created_by` and the
/// event log), with the caller as the request's and items' `opened_by`; the caller then reads them through the
/// ordinary rules (what they opened or is requested for them). Catalog tasks are the fulfillers': nobody opens them.
struct ServiceCatalog: Sendable {
    let store: RecordStore

    /// One line of an order.
    struct Line: Sendable {
        var item: String
        var quantity: Int
        /// A sys_id or a user name; empty: the caller.
        var requestedFor: String
        var variables: [String: String]
    }

    struct Order: Sendable {
        var requestID: String
        var requestNumber: String
        var itemIDs: [String]
    }

    static let maxQuantity = 1000
    static let maxLines = 100

    /// The item, if the caller may see it and it can be ordered.
    func orderableItem(_ sysID: String, caller: Caller) async throws -> Record {
        let item = try await store.get(sysID, in: "sc_cat_item", fields: ["sys_id", "name", "active", "group", "price"], caller: caller).record
        guard item.values["active"] == "true" else {
            throw EngineError.badRequest("Item is not available", detail: "The catalog item \(item.values["name"] ?? sysID) is not active")
        }
        return item
    }

    /// A user given as a sys_id or a user name, as a sys_id; empty: the caller.
    func user(_ given: String, caller: Caller) async throws -> String {
        if given.isEmpty { return caller.userID }
        guard !given.contains("^"), given.utf8.count <= 100 else {
            throw EngineError.badRequest("Invalid requested for", detail: "Give a user's sys_id or user name", field: "sysparm_requested_for")
        }
        let page = try await store.list(
            RecordQuery(table: "sys_user", query: try EncodedQuery("sys_id=\(given)^ORuser_name=\(given)"),
                        fields: ["sys_id"], limit: 2, count: false),
            caller: .system
        )
        guard page.records.count == 1, let id = page.records[0].values["sys_id"] else {
            throw EngineError.badRequest("Invalid requested for", detail: "No user is called '\(given.prefix(100))'", field: "sysparm_requested_for")
        }
        return id
    }

    /// Checks a line: quantity in range, the item orderable, its mandatory variables answered. Returns the item's
    /// variables (name → sys_id) to store the answers under.
    func check(_ line: Line, caller: Caller) async throws -> (item: Record, variables: [(name: String, id: String)]) {
        guard (1...Self.maxQuantity).contains(line.quantity) else {
            throw EngineError.badRequest("Invalid quantity", detail: "sysparm_quantity must be 1 to \(Self.maxQuantity)", field: "sysparm_quantity")
        }
        let item = try await orderableItem(line.item, caller: caller)
        let page = try await store.list(
            RecordQuery(table: "item_option_new", query: try EncodedQuery("cat_item=\(line.item)^active=true^ORDERBYorder"),
                        fields: ["sys_id", "name", "mandatory", "question_text"], limit: 200, count: false),
            caller: .system
        )
        var variables: [(String, String)] = []
        for record in page.records {
            let name = record.values["name"] ?? ""
            if record.values["mandatory"] == "true", line.variables[name, default: ""].isEmpty {
                throw EngineError.badRequest(
                    "Mandatory variable missing", detail: "\(record.values["question_text"] ?? name) (\(name)) must be answered", field: name
                )
            }
            variables.append((name, record.values["sys_id"] ?? ""))
        }
        return (item, variables)
    }

    /// Places an order: the request, its requested items with their answers, and their tasks. When a write fails
    /// part way, what was written is removed again and the error is thrown.
    func order(_ lines: [Line], caller: Caller) async throws -> Order {
        guard !lines.isEmpty, lines.count <= Self.maxLines else {
            throw EngineError.badRequest("Invalid order", detail: "An order has 1 to \(Self.maxLines) items")
        }
        var checked: [(line: Line, item: Record, variables: [(name: String, id: String)], requestedFor: String)] = []
        for line in lines {
            let (item, variables) = try await check(line, caller: caller)
            checked.append((line, item, variables, try await user(line.requestedFor, caller: caller)))
        }
        // The caller, allowed to write what an order is made of (the values are the engine's, not the caller's).
        var actor = caller
        actor.roles.insert("admin")
        var written: [(table: String, sysID: String)] = []
        func insert(_ table: String, _ values: [String: String]) async throws -> String {
            let id = try await store.insert(into: table, values: values, caller: actor)
            written.append((table, id))
            return id
        }
        do {
            let first = checked[0]
            let requestID = try await insert("sc_request", [
                "requested_for": first.requestedFor, "requested_by": caller.userID, "opened_by": caller.userID,
                "short_description": first.item.values["name"] ?? "", "request_state": "in_process", "stage": "fulfillment",
                "price": String(checked.reduce(0.0) { $0 + (Double($1.item.values["price"] ?? "") ?? 0) * Double($1.line.quantity) }),
            ])
            var itemIDs: [String] = []
            for entry in checked {
                let name = entry.item.values["name"] ?? ""
                let itemID = try await insert("sc_req_item", [
                    "request": requestID, "cat_item": entry.line.item, "quantity": String(entry.line.quantity),
                    "requested_for": entry.requestedFor, "opened_by": caller.userID, "short_description": name,
                    "price": entry.item.values["price"] ?? "", "stage": "fulfillment",
                ])
                itemIDs.append(itemID)
                for (order, variable) in entry.variables.enumerated() {
                    guard let answer = entry.line.variables[variable.name] else { continue }
                    let option = try await insert("sc_item_option", [
                        "item_option_new": variable.id, "value": answer, "order": String(order * 100),
                    ])
                    _ = try await insert("sc_item_option_mtom", ["request_item": itemID, "sc_item_option": option])
                }
                _ = try await insert("sc_task", [
                    "request_item": itemID, "request": requestID, "opened_by": "",
                    "short_description": "Fulfill \(name)", "assignment_group": entry.item.values["group"] ?? "",
                ])
            }
            let number = try await store.get(requestID, in: "sc_request", fields: ["number"], caller: .system).record.values["number"] ?? ""
            return Order(requestID: requestID, requestNumber: number, itemIDs: itemIDs)
        } catch {
            // The records are written one by one: what was written of a failed order is removed again. The caller
            // is told the order's own failure (503 when storage is down); a removal that fails too leaves a request
            // without all its items, which fulfillers see.
            for record in written.reversed() {
                do {
                    try await store.delete(record.sysID, from: record.table, caller: .system)
                } catch {
                    break
                }
            }
            throw error
        }
    }
}
