import Foundation
import DocketModel

/// One record as the Table API returned it, fields in the order received.
///
/// Values may be plain strings or, depending on `sysparm_display_value`, objects with `value`,
/// `display_value` and `link`; ``subscript(_:)`` and ``displayValue(_:)`` read either shape.
public struct TableRecord: Sendable, Equatable {
    /// The JSON object of the record.
    public let json: JSONValue

    /// Wraps a JSON object.
    public init(json: JSONValue) { self.json = json }

    /// The field names, in order.
    public var fieldNames: [String] { json.objectValue?.map(\.0) ?? [] }

    /// The raw value of a field (`value` of an object, or the string itself); nil when absent.
    public subscript(field: String) -> String? {
        guard let value = json[field] else { return nil }
        switch value {
        case .string(let text): return text
        case .object: return value["value"]?.stringValue ?? value["display_value"]?.stringValue
        case .null: return ""
        default: return nil
        }
    }

    /// The display value of a field when the record was read with display values, else its raw value.
    public func displayValue(_ field: String) -> String? {
        guard let value = json[field] else { return nil }
        if case .object = value { return value["display_value"]?.stringValue ?? value["value"]?.stringValue }
        return value.stringValue
    }

    /// The record's sys_id.
    public var sysID: String { self["sys_id"] ?? "" }
}

/// One page of a list read.
public struct RecordPage: Sendable {
    /// The records of this page.
    public var records: [TableRecord]
    /// `X-Total-Count`: records matching the query on the instance, when it said.
    public var totalCount: Int?
    /// The `rel="next"` link, when there is a next page.
    public var next: URL?
}

/// `sysparm_display_value`.
public enum DisplayValue: String, Sendable, CaseIterable {
    /// Raw values (the default).
    case `false`
    /// Display values (labels, names).
    case `true`
    /// Both, as `{"display_value", "value"}` objects.
    case all
}

