import Foundation

// The Compass ("Traxiem") REST API's shapes, as this SDK reads them: every key the stock clients rely on, the rest
// optional, unknown keys ignored, and fields looked up by name (never by position).

/// A field of a Compass record (`fields[]` of a record, or `GET …/fields/{name}`).
public struct CompassField: Codable, Sendable, Equatable {
    /// The field name (`Headline`, `State`, `Owner`…).
    public var name: String
    /// The value as a string (`""` when empty); list fields join their items with newlines.
    public var value: String
    /// The items of a list-valued field.
    public var valueAsList: [String]?
    /// `MANDATORY`, `OPTIONAL` or `READONLY` for the current state and action.
    public var requiredness: String
    /// The field type (`SHORT_STRING`, `REFERENCE`, `STATE`…).
    public var type: String?
    /// A validation message, `""` when none.
    public var messageText: String?
    /// The values a picker offers (only from `GET …/fields/{name}`).
    public var fieldChoiceList: [String]?
}

/// An action the caller may run on a record now.
public struct CompassLegalAction: Codable, Sendable, Equatable {
    public var actionName: String
    public var formDefName: String?
}

/// A Compass record (`GET …/records/{type}/{id}`, and the answer of every edit).
public struct CompassRecord: Codable, Sendable, Equatable {
    /// The internal numeric id, as a string.
    public var dbId: String
    /// The display id (`SAMPL00000001`).
    public var displayName: String?
    /// The record type.
    public var entityDefName: String?
    public var fields: [CompassField]
    /// The actions the caller may run now, in the current state.
    public var legalActions: [CompassLegalAction]?
    /// A commit's validation failure, if any.
    public var errorMessage: String?

    /// A field by name (case-insensitive); nil when the record has none.
    public func field(_ name: String) -> CompassField? {
        fields.first { $0.name == name } ?? fields.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }
    }

    /// A field's value by name, or "".
    public subscript(name: String) -> String { field(name)?.value ?? "" }

    /// The display id: the `id` field, else `displayName`.
    public var id: String {
        let id = self["id"]
        return id.isEmpty ? displayName ?? dbId : id
    }
}

/// One action of a record type.
public struct CompassAction: Codable, Sendable, Equatable {
    public var name: String
    /// `_SUBMIT`, `_MODIFY`, `_CHANGE_STATE`, `_DUPLICATE`, `_UNDUPLICATE`, `_DELETE`…
    public var actionType: String
    /// The states it runs from (empty: any).
    public var actionSourceStateNames: [String]
    /// The state it leads to (empty: the same, or the one saved by Duplicate).
    public var actionDestStateName: String
}

/// A record type (`GET …/records/{type}`): its actions (and with them its states).
public struct CompassRecordType: Codable, Sendable, Equatable {
    public var name: String
    public var dbId: String?
    public var actions: [CompassAction]
}

/// A database of a repository.
public struct CompassDatabase: Codable, Sendable, Equatable {
    public var name: String
    public var dbId: String?
    public var description: String?
}

/// A workspace folder or an item in one.
public struct CompassWorkspaceItem: Codable, Sendable, Equatable {
    public var name: String
    public var dbId: String
    public var workspaceItemType: String?
    public var children: [CompassWorkspaceItem]?
}

/// A column of a query.
public struct CompassQueryField: Codable, Sendable, Equatable {
    public var fieldPathName: String
    public var isShown: Bool
    /// `NO_SORT`, `SORT_ASC` or `SORT_DESC`.
    public var sortType: String
    public var sortOrder: Int?

    public init(_ fieldPathName: String, isShown: Bool = true, sortType: String = "NO_SORT", sortOrder: Int? = nil) {
        self.fieldPathName = fieldPathName
        self.isShown = isShown
        self.sortType = sortType
        self.sortOrder = sortOrder
    }
}

/// One condition of a query's filter.
public struct CompassFieldFilter: Codable, Sendable, Equatable {
    public var fieldPath: String
    /// `COMP_OP_EQ`, `COMP_OP_NEQ`, `COMP_OP_IN`, `COMP_OP_GT`…
    public var compOp: String
    public var values: [String]

    public init(_ fieldPath: String, _ compOp: String, _ values: [String]) {
        self.fieldPath = fieldPath
        self.compOp = compOp
        self.values = values
    }
}

/// A query's filter tree.
public struct CompassFilterNode: Codable, Sendable, Equatable {
    /// `BOOL_OP_AND` or `BOOL_OP_OR`.
    public var boolOp: String
    public var fieldFilters: [CompassFieldFilter]
    public var childFilterNodes: [CompassFilterNode]?

    public init(boolOp: String = "BOOL_OP_AND", _ fieldFilters: [CompassFieldFilter], children: [CompassFilterNode]? = nil) {
        self.boolOp = boolOp
        self.fieldFilters = fieldFilters
        childFilterNodes = children
    }
}

/// A saved query definition.
public struct CompassQueryDef: Codable, Sendable, Equatable {
    public var name: String
    public var dbId: String?
    public var dbIdParent: String?
    public var primaryEntityDefName: String
    public var queryFieldDefs: [CompassQueryField]
    public var filterNode: CompassFilterNode

    public init(
        name: String, folder: String?, recordType: String, columns: [CompassQueryField], filter: CompassFilterNode
    ) {
        self.name = name
        dbIdParent = folder
        primaryEntityDefName = recordType
        queryFieldDefs = columns
        filterNode = filter
    }

    /// The shown columns' paths, in the order a result row's values follow.
    public var shownColumns: [String] { queryFieldDefs.filter(\.isShown).map(\.fieldPathName) }
}

/// A row of a result set: its values in the order of the query's shown columns.
public struct CompassRow: Codable, Sendable, Equatable {
    public var values: [String]
    public var displayName: String?
}
