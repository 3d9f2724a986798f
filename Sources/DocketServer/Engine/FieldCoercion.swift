import DocketModel
import Foundation

/// Validates written values against field types and converts between the wire's strings and columns.
enum FieldCoercion {
    /// What a set password reads as.
    static let passwordMask = "********"

    /// The canonical string for a written value; `""` for empty. Throws a 400 for a value of the wrong type.
    static func normalize(_ value: String, for field: FieldDefinition) throws(EngineError) -> String {
        if value.isEmpty { return "" }
        func invalid(_ expected: String) -> EngineError {
            .badRequest(
                "Invalid value for field '\(field.name)'",
                detail: "'\(value.prefix(80))' is not \(expected)"
            )
        }
        switch field.type {
        case .integer:
            guard let number = Int(value.trimmingCharacters(in: .whitespaces)) else { throw invalid("an integer") }
            return String(number)
        case .decimal:
            guard let number = Double(value.trimmingCharacters(in: .whitespaces)), number.isFinite else {
                throw invalid("a number")
            }
            return RecordStore.string(.real(number), type: .decimal)
        case .boolean:
            switch value.lowercased() {
            case "true", "1": return "true"
            case "false", "0": return "false"
            default: throw invalid("true or false")
            }
        case .glideDateTime:
            guard let normalized = GlideDateTime.normalize(value) else {
                throw invalid("a date-time (YYYY-MM-DD HH:MM:SS)")
            }
            return normalized
        case .glideDate:
            guard let date = GlideDateTime.parse(value) else { throw invalid("a date (YYYY-MM-DD)") }
            return GlideDateTime.formatDate(date)
        case .reference, .sysID:
            guard SysID.isValid(value) else { throw invalid("a sys_id") }
            return value
        case .glideList:
            let ids = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard ids.allSatisfy(SysID.isValid) else { throw invalid("a comma-separated list of sys_ids") }
            return ids.joined(separator: ",")
        case .string, .choice, .journal, .password, .tableName:
            guard value.utf8.count <= max(field.maxLength, 40) * 4 else {
                throw invalid("at most \(field.maxLength) characters long")
            }
            return value
        }
    }

    /// The column value for a normalized string.
    static func sqlValue(_ value: String, for field: FieldDefinition) -> SQLValue {
        if value.isEmpty { return .null }
        switch field.type {
        case .integer: return Int(value).map(SQLValue.integer) ?? .null
        case .boolean: return .integer(value == "true" ? 1 : 0)
        case .decimal: return Double(value).map(SQLValue.real) ?? .null
        default: return .text(value)
        }
    }
}
