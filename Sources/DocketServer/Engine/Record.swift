import Foundation
import DocketModel

/// A record as the engine hands it to dialects: every value a string (`""` when empty), keyed by the
/// requested field names, which may be dot-walked (`caller_id.email`).
struct Record: Sendable, Equatable {
    /// The concrete table (`incident` when read through `task`).
    var table: String
    var sysID: String
    var values: [String: String]

    subscript(field: String) -> String { values[field] ?? "" }
}

/// A column of a result: the requested name and the field it resolved to (for dot-walks, the last one).
struct ResultColumn: Sendable {
    let name: String
    let field: FieldDefinition
    /// The name as a JSON member name, encoded once.
    let jsonKey: [UInt8]
    /// A dot-walk (`caller_id.email`): the field belongs to another table than the record's.
    let isDotWalk: Bool

    init(name: String, field: FieldDefinition) {
        self.name = name
        self.field = field
        self.jsonKey = JSONWriter.encodedKey(name)
        self.isDotWalk = name.utf8.contains(UInt8(ascii: "."))
    }
}

/// One page of a list read.
struct RecordPage: Sendable {
    var columns: [ResultColumn]
    var records: [Record]
    /// Rows matching the query that the caller may read; nil when counting was not asked for.
    var total: Int?
}

/// What to read.
struct RecordQuery: Sendable {
    var table: String
    var query = EncodedQuery()
    /// Field names to return (dot-walks allowed); nil for all fields of the table. Unknown names are ignored.
    var fields: [String]? = nil
    var limit = 10_000
    var offset = 0
    var count = true
    /// What a term the engine cannot use (an unknown field or table, an unknown dynamic value) does to the query.
    var invalidTerms = InvalidQueryTerms.ignore
}

/// What a query's unusable terms do (see ``QueryCompiler/UnknownFields``).
enum InvalidQueryTerms: Sendable {
    /// They are dropped, the rest of the query applies (ServiceNow's default).
    case ignore
    /// The query returns no rows (ServiceNow's `glide.invalid_query.returns_no_rows`). People typing a query are
    /// refused with the term instead (``RecordStore/check(_:in:caller:)``).
    case noRows
}

/// How to interpret written values.
struct WriteOptions: Sendable {
    /// Values are display values: choice labels, reference display names.
    var inputDisplayValue = false
    /// Keep `sys_` fields as given instead of maintaining them (demo data, imports).
    var suppressAutoSysFields = false
    /// The time zone display values of dates are written in (the caller's); nil for UTC.
    var timeZone: TimeZone? = nil
    /// Optimistic concurrency for updates: the `sys_mod_count` the writer read. When another write came first,
    /// the update writes nothing and fails with ``EngineError/Code/conflict`` carrying the current record.
    var expectedModCount: Int? = nil
    /// The workflow action the write runs, on a table whose state model has actions (``StateModel``); nil: the
    /// submit action for a create, and for a change the change-state action its new `state` amounts to, or the
    /// modify action.
    var action: String? = nil
    /// The request's `Idempotency-Key`: recorded in the write's transaction (``IdempotencyRecords``); a key used
    /// before makes the write throw ``IdempotencyRecords/Used`` and write nothing.
    var idempotency: IdempotencyClaim? = nil
    /// The write decides from rows other than its own (an attachment quota sums a record's or a user's uploads):
    /// it runs exclusively (``WriteScope/exclusive``), so that two such writes never both pass on what the other
    /// has not committed yet.
    var exclusive = false

    /// The options as `caller` may use them: only admins may set `sys_` fields (their author, times and
    /// update count are the audit trail).
    func allowed(for caller: Caller) -> WriteOptions {
        guard suppressAutoSysFields, !caller.isAdmin else { return self }
        var options = self
        options.suppressAutoSysFields = false
        return options
    }
}
