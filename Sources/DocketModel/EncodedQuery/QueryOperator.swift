/// An operator of the encoded query language (`sysparm_query`).
///
/// The raw value is the canonical spelling used when printing a query.
public enum QueryOperator: String, Sendable, CaseIterable {
    case equals = "="
    case notEquals = "!="
    case lessThan = "<"
    case lessOrEqual = "<="
    case greaterThan = ">"
    case greaterOrEqual = ">="
    case like = "LIKE"
    case notLike = "NOT LIKE"
    case startsWith = "STARTSWITH"
    case endsWith = "ENDSWITH"
    case `in` = "IN"
    case notIn = "NOT IN"
    case isEmpty = "ISEMPTY"
    case isNotEmpty = "ISNOTEMPTY"
    case emptyString = "EMPTYSTRING"
    case anything = "ANYTHING"
    case between = "BETWEEN"
    case sameAs = "SAMEAS"
    case notSameAs = "NSAMEAS"
    case instanceOf = "INSTANCEOF"

    /// Whether the operator takes no value (`assigned_toISEMPTY`).
    public var isUnary: Bool {
        switch self {
        case .isEmpty, .isNotEmpty, .emptyString, .anything: return true
        default: return false
        }
    }

    /// Every accepted spelling, longest first so that matching is unambiguous (`NOT LIKE` before `LIKE`,
    /// `<=` before `<`). Aliases: `NOTLIKE` and `!*` for `NOT LIKE`, `*` for `LIKE`, `%` for `ENDSWITH`.
    static let spellings: [(String, QueryOperator)] = {
        var list = allCases.map { ($0.rawValue, $0) }
        list += [("NOTLIKE", .notLike), ("!*", .notLike), ("*", .like), ("%", .endsWith)]
        return list.sorted { $0.0.utf8.count > $1.0.utf8.count }
    }()
}
