/// Why the engine refused or failed an operation, with what it concerns (table, sys_id, field, operation).
/// Dialects word it in their own envelopes: the canned ``Reason``s have no wording here at all, and other
/// errors carry a plain message a dialect may pass on.
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
        /// The record changed since the writer read it (optimistic concurrency); ``EngineError/current`` holds it.
        case conflict
    }

    /// The common refusals, which each dialect words its own way.
    enum Reason: Sendable, Equatable {
        case unknownTable
        case recordMissing
        case accessDenied
        case queryNotAllowed
        case changedSinceRead
    }

    let code: Code
    /// A plain sentence saying what went wrong (for errors without a ``Reason``, the words a dialect passes on).
    let message: String
    let detail: String?
    var reason: Reason? = nil
    var table: String? = nil
    var sysID: String? = nil
    var field: String? = nil
    var operation: AccessOperation? = nil
    /// For a conflict: the record as it is now (stored values).
    var current: [String: String]? = nil
    /// For a refused write: every field that failed validation (mandatory and empty, or read-only and written).
    var fields: [String]? = nil
    /// For a refused write: the fields mandatory and empty, those read-only and written, and the action that ran,
    /// so that a dialect can say it in its own field names.
    var validation: Validation? = nil

    struct Validation: Sendable, Equatable {
        var missing: [String]
        var readOnly: [String]
        var action: String?
    }

    init(_ code: Code, _ message: String, detail: String? = nil) {
        self.code = code
        self.message = message
        self.detail = detail
    }

    static func invalidTable(_ name: String) -> EngineError {
        var error = EngineError(.invalidTable, "There is no table \(name)")
        error.reason = .unknownTable
        error.table = name
        return error
    }

    static var notFound: EngineError { notFound() }

    static func notFound(table: String? = nil, sysID: String? = nil) -> EngineError {
        var error = EngineError(.notFound, "The record does not exist or the caller may not read it")
        error.reason = .recordMissing
        error.table = table
        error.sysID = sysID
        return error
    }

    static func forbidden(_ operation: AccessOperation, table: String? = nil, sysID: String? = nil) -> EngineError {
        var error = EngineError(.forbidden, "The access rules do not allow \(operation.rawValue) here")
        error.reason = .accessDenied
        error.operation = operation
        error.table = table
        error.sysID = sysID
        return error
    }

    static var forbiddenQuery: EngineError {
        var error = EngineError(.forbiddenQuery, "The query names a field the caller may not read")
        error.reason = .queryNotAllowed
        return error
    }

    /// Another write came first: the record's `sys_mod_count` is no longer the one the writer expected.
    static func conflict(table: String, sysID: String, expected: Int, current: [String: String]) -> EngineError {
        var error = EngineError(
            .conflict, "The record was changed by someone else",
            detail: "Expected version \(expected), the record is at \(current["sys_mod_count"] ?? "?")"
        )
        error.reason = .changedSinceRead
        error.table = table
        error.sysID = sysID
        error.operation = .write
        error.current = current
        return error
    }

    static func badRequest(_ message: String, detail: String? = nil, field: String? = nil) -> EngineError {
        var error = EngineError(.badRequest, message, detail: detail)
        error.field = field
        return error
    }

    var description: String { detail.map { "\(message): \($0)" } ?? message }
}
