/// Why the engine refused or failed an operation. Dialects map these to their own wire envelopes.
struct EngineError: Error, Sendable, Equatable, CustomStringConvertible {
    enum Code: Sendable, Equatable {
        /// The table does not exist.
        case invalidTable
        /// No such record, or the caller may not see it.
        case notFound
        /// The caller may not read, create, change or delete this.
        case forbidden
        /// The query names a field the caller may not query.
        case forbiddenQuery
        /// The request is malformed: a bad query, a value of the wrong type.
        case badRequest
        /// Storing this would exceed a configured quota.
        case quotaExceeded
    }

    let code: Code
    let message: String
    let detail: String?

    init(_ code: Code, _ message: String, detail: String? = nil) {
        self.code = code
        self.message = message
        self.detail = detail
    }

    static func invalidTable(_ name: String) -> EngineError { .init(.invalidTable, "Invalid table \(name)") }

    static let notFound = EngineError(
        .notFound, "No Record found", detail: "Record doesn't exist or ACL restricts the record retrieval"
    )

    static func forbidden(_ operation: AccessOperation) -> EngineError {
        let verb: String
        switch operation {
        case .read: verb = "Read"
        case .create: verb = "Insert"
        case .write: verb = "Update"
        case .delete: verb = "Delete"
        }
        return .init(.forbidden, "Operation Failed", detail: "ACL Exception \(verb) Failed due to security constraints")
    }

    static let forbiddenQuery = EngineError(
        .forbiddenQuery, "Insufficient rights to query records",
        detail: "Field(s) present in the query do not have permission to be read"
    )

    static func badRequest(_ message: String, detail: String? = nil) -> EngineError {
        .init(.badRequest, message, detail: detail)
    }

    var description: String { detail.map { "\(message): \($0)" } ?? message }
}
