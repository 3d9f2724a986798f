import DocketModel
import Foundation

/// What the command line and other people-facing clients check before they send: field names against the
/// table's dictionary, with "did you mean". The Table API itself ignores unknown fields (as ServiceNow's does), so a
/// typo would otherwise be written nowhere and reported as a success, or drop a condition and list everything.
extension ServiceNowBackend {
    /// A table's dictionary: each field, and the table a reference field refers to ("" for other fields).
    public struct FieldDictionary: Sendable {
        /// Field name to its reference table ("" when it is no reference).
        public let fields: [String: String]

        /// The names, in no particular order.
        public var names: [String] { Array(fields.keys) }

        /// Whether the table has the field (in any case; the system fields every record has are taken as known).
        public func has(_ name: String) -> Bool { reference(of: name) != nil }

        /// The field's reference table ("" for a field that is no reference), or nil when the table has no such field.
        public func reference(of name: String) -> String? {
            if let found = fields[name] ?? fields[name.lowercased()] { return found }
            return name.hasPrefix("sys_") ? "" : nil
        }
    }

    /// The fields of `table` and of the tables it extends, from `sys_dictionary`; nil when the dictionary cannot be
    /// read (the caller may not, the instance refuses the query, or it fails): then nothing is checked, nothing is
    /// refused for it, and the request itself tells what the instance makes of it.
    public func dictionary(of table: String) async throws -> FieldDictionary? {
        do {
            let rows = try await dictionaryRows(of: table, fields: ["element", "reference"])
            var fields: [String: String] = [:]
            for row in rows {
                guard let element = row["element"], !element.isEmpty else { continue }
                if fields[element]?.isEmpty ?? true { fields[element] = row["reference"] ?? "" }
            }
            // A table the caller cannot see into reads as empty: nothing to check against.
            return fields.isEmpty ? nil : FieldDictionary(fields: fields)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            return nil
        }
    }

    /// Refuses field names `table` does not have, naming the field meant where one is close:
    /// "incident has no field 'staet' (did you mean state?)".
    public func checkFields(_ names: [String], in table: String) async throws {
        guard let dictionary = try await dictionary(of: table) else { return }
        var problems: [String] = []
        for name in names where !dictionary.has(name) {
            problems.append(Self.unknown(name, in: table, dictionary))
        }
        guard problems.isEmpty else {
            throw DocketError(kind: .invalidRequest, message: problems.joined(separator: "; "))
        }
    }

    /// Refuses a query with a condition or sort on a field the table does not have (dot-walks followed through
    /// reference fields), with the field meant where one is close. `JOIN` and `RLQUERY` terms are left to the
    /// instance.
    public func checkQuery(_ query: EncodedQuery, in table: String) async throws {
        guard let root = try await dictionary(of: table) else { return }
        var dictionaries = [table: root]
        var problems: [String] = []
        // As the instance reads them: `ORDERBYpublishedDESC` sorts on `published` descending where `publishedDESC` is no
        // field, and Compass's `history.…` paths are about a record's history, not its fields.
        let sorts = query.orderBy.map { term in
            term.field.hasSuffix("DESC") && !term.descending && !root.has(term.field) ? String(term.field.dropLast(4)) : term.field
        }
        var checked: Set<String> = []
        let paths = (query.conditions.map(\.field) + sorts).filter { !$0.hasPrefix("history.") && checked.insert($0).inserted }
        for path in paths {
            var current = (name: table, dictionary: root)
            let segments = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            for (index, segment) in segments.enumerated() {
                guard let reference = current.dictionary.reference(of: segment) else {
                    let walked = segments[..<index].joined(separator: ".")
                    problems.append(Self.unknown(segment, in: current.name, current.dictionary) + (walked.isEmpty ? "" : " (in '\(path)')"))
                    break
                }
                guard index < segments.count - 1 else { break }
                guard !reference.isEmpty else {
                    problems.append("'\(segment)' of \(current.name) is no reference, so '\(path)' cannot be followed")
                    break
                }
                if dictionaries[reference] == nil, dictionaries.count < 16 {
                    dictionaries[reference] = try await dictionary(of: reference)
                }
                guard let next = dictionaries[reference] else { break }
                current = (reference, next)
            }
        }
        guard problems.isEmpty else {
            throw DocketError(kind: .invalidRequest, message: "the query cannot run: " + problems.joined(separator: "; "))
        }
    }

    static func unknown(_ name: String, in table: String, _ dictionary: FieldDictionary) -> String {
        let meant = Suggestions.phrase(for: name, among: dictionary.names.sorted())
        return "\(table) has no field '\(name)'" + (meant.isEmpty ? "" : " (\(meant))")
    }
}
