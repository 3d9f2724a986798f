import DocketModel
import Foundation

/// The ServiceNow Table API: `/api/now/table/{table}`.
///
/// ```swift
/// let page = try await client.table.records(in: "incident", query: .where("active", .equals, "true"), limit: 20)
/// for record in page.records { print(record["number"] ?? "", record["short_description"] ?? "") }
/// ```
public struct TableService: Sendable {
    let session: DocketSession

    /// Reads one page of records with their total count.
    public func records(
        in table: String, query: EncodedQuery? = nil, fields: [String]? = nil, limit: Int? = nil, offset: Int? = nil,
        displayValue: DisplayValue = .false
    ) async throws -> RecordPage {
        let response = try await session.send(
            "GET", Self.path(table), query: Self.listQuery(query, fields, limit, offset, displayValue)
        )
        return try Self.page(from: response)
    }

    /// Reads one record by sys_id; a missing record is a ``DocketError`` with status 404.
    public func record(
        _ sysID: String, in table: String, fields: [String]? = nil, displayValue: DisplayValue = .false
    ) async throws -> TableRecord {
        var query: [(String, String)] = [("sysparm_display_value", displayValue.rawValue)]
        if let fields { query.append(("sysparm_fields", fields.joined(separator: ","))) }
        return try Self.single(from: try await session.send("GET", Self.path(table, sysID), query: query))
    }

    /// Creates a record; returns it as stored (with sys_id, number and defaults). With `inputDisplayValue`, values
    /// may be what a person reads (`sysparm_input_display_value=true`): choice labels (`1 - High`), names of
    /// referenced records, dates in the user's time zone.
    public func createRecord(
        with values: [String: String], in table: String, inputDisplayValue: Bool = false
    ) async throws -> TableRecord {
        try Self.single(from: try await session.send(
            "POST", Self.path(table), query: Self.inputQuery(inputDisplayValue), body: try Self.body(values)
        ))
    }

    /// Changes the given fields of a record; returns it as stored. Setting `comments` or `work_notes` adds a
    /// journal entry. `inputDisplayValue` as for ``createRecord(with:in:inputDisplayValue:)``.
    public func updateRecord(
        _ sysID: String, in table: String, with values: [String: String], inputDisplayValue: Bool = false
    ) async throws -> TableRecord {
        try Self.single(from: try await session.send(
            "PATCH", Self.path(table, sysID), query: Self.inputQuery(inputDisplayValue), body: try Self.body(values)
        ))
    }

    // MARK: Conditional and idempotent writes (docketd)

    /// The headers of a write that applies only to `version` (`If-Match`) and is done once per `idempotencyKey`.
    static func conditions(version: Int?, idempotencyKey: String?) -> [String: String] {
        var headers: [String: String] = [:]
        if let version { headers["If-Match"] = "\"\(version)\"" }
        if let idempotencyKey { headers["Idempotency-Key"] = idempotencyKey }
        return headers
    }

    /// Values as stored, without display values or reference links: what an offline copy keeps.
    static let rawValues: [(String, String)] = [("sysparm_display_value", "false"), ("sysparm_exclude_reference_link", "true")]

    /// Creates a record once per `idempotencyKey` (the same key again is answered as the first time, without a second
    /// record); `values` may name its `sys_id`. Against docketd.
    public func createRecord(
        with values: [String: String], in table: String, idempotencyKey: String
    ) async throws -> TableRecord {
        try Self.single(from: try await session.send(
            "POST", Self.path(table), query: Self.rawValues, body: try Self.body(values),
            headers: Self.conditions(version: nil, idempotencyKey: idempotencyKey)
        ))
    }

    /// Changes a record only while it is at `version` (its `sys_mod_count`): otherwise a ``DocketError`` with status
    /// 412 whose ``DocketError/responseBody`` holds the current record (``TableService/currentRecord(of:)``). Done once
    /// per `idempotencyKey`. Against docketd.
    public func updateRecord(
        _ sysID: String, in table: String, with values: [String: String], ifVersion version: Int?, idempotencyKey: String?
    ) async throws -> TableRecord {
        try Self.single(from: try await session.send(
            "PATCH", Self.path(table, sysID), query: Self.rawValues, body: try Self.body(values),
            headers: Self.conditions(version: version, idempotencyKey: idempotencyKey)
        ))
    }

    /// Deletes a record only while it is at `version` (else a 412 as for updates), once per `idempotencyKey`.
    public func deleteRecord(_ sysID: String, in table: String, ifVersion version: Int?, idempotencyKey: String?) async throws {
        _ = try await session.send(
            "DELETE", Self.path(table, sysID), query: Self.rawValues,
            headers: Self.conditions(version: version, idempotencyKey: idempotencyKey)
        )
    }

    /// The current record a 412 came with (`result` beside `error`), if any.
    public static func currentRecord(of error: DocketError) -> TableRecord? {
        guard error.status == 412, let body = error.responseBody, let json = try? JSONValue.parse(body),
            let result = json["result"], case .object = result
        else { return nil }
        return TableRecord(json: result)
    }

    static func inputQuery(_ inputDisplayValue: Bool) -> [(String, String)] {
        inputDisplayValue ? [("sysparm_input_display_value", "true")] : []
    }

    /// Deletes a record.
    public func deleteRecord(_ sysID: String, in table: String) async throws {
        _ = try await session.send("DELETE", Self.path(table, sysID))
    }

    /// Pages through every matching record, in order, following the `Link` header's `next`.
    ///
    /// With `concurrency` above 1, up to that many page requests are in flight at once once the first page
    /// has told the total (later pages' offsets are derived from its `next` link); pages still arrive in
    /// order. Instances limit concurrent requests per user, so keep it small.
    ///
    /// ```swift
    /// for try await page in client.table.paginator(in: "incident", pageSize: 500, concurrency: 2) { … }
    /// ```
    public func paginator(
        in table: String, query: EncodedQuery? = nil, fields: [String]? = nil, pageSize: Int = 1000,
        displayValue: DisplayValue = .false, concurrency: Int = 1
    ) -> RecordPaginator {
        RecordPaginator(
            session: session,
            first: session.instance.url(
                Self.path(table), query: Self.listQuery(query, fields, pageSize, 0, displayValue)
            ),
            concurrency: max(1, concurrency)
        )
    }

    // MARK: Decodable variants

    /// Reads one page decoded as `T` (use string properties: every Table API value is a string).
    public func records<T: Decodable>(
        _ type: T.Type, in table: String, query: EncodedQuery? = nil, fields: [String]? = nil, limit: Int? = nil,
        offset: Int? = nil
    ) async throws -> [T] {
        let response = try await session.send(
            "GET", Self.path(table), query: Self.listQuery(query, fields, limit, offset, .false)
        )
        return try Self.decode([T].self, from: response)
    }

    /// Reads one record decoded as `T`.
    public func record<T: Decodable>(_ type: T.Type, _ sysID: String, in table: String) async throws -> T {
        try Self.decode(T.self, from: try await session.send("GET", Self.path(table, sysID)))
    }

    /// Creates a record from an `Encodable` value and decodes the stored record as `T`.
    public func createRecord<Value: Encodable, T: Decodable>(
        _ value: Value, in table: String, as type: T.Type
    ) async throws -> T {
        let body = try JSONEncoder().encode(value)
        return try Self.decode(T.self, from: try await session.send("POST", Self.path(table), body: body))
    }

    /// Updates a record from an `Encodable` value and decodes the stored record as `T`.
    public func updateRecord<Value: Encodable, T: Decodable>(
        _ sysID: String, in table: String, with value: Value, as type: T.Type
    ) async throws -> T {
        let body = try JSONEncoder().encode(value)
        return try Self.decode(T.self, from: try await session.send("PATCH", Self.path(table, sysID), body: body))
    }

    // MARK: Helpers

    static func path(_ table: String, _ sysID: String? = nil) -> String {
        "/api/now/table/" + Instance.encode(table) + (sysID.map { "/" + Instance.encode($0) } ?? "")
    }

    static func listQuery(
        _ query: EncodedQuery?, _ fields: [String]?, _ limit: Int?, _ offset: Int?, _ displayValue: DisplayValue
    ) -> [(String, String)] {
        var items: [(String, String)] = []
        if let query, !query.description.isEmpty { items.append(("sysparm_query", query.description)) }
        if let fields { items.append(("sysparm_fields", fields.joined(separator: ","))) }
        if let limit { items.append(("sysparm_limit", String(limit))) }
        if let offset { items.append(("sysparm_offset", String(offset))) }
        if displayValue != .false { items.append(("sysparm_display_value", displayValue.rawValue)) }
        return items
    }

    /// A record body, its members in name order (the same values are always the same bytes).
    static func body(_ values: [String: String]) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return try encoder.encode(values)
    }

    static func page(from response: HTTPResponseData) throws -> RecordPage {
        let json = try parse(response)
        guard let list = json["result"]?.arrayValue else {
            throw DocketError(kind: .decoding, message: "unexpected response from the instance", detail: "no result list")
        }
        return RecordPage(
            records: list.map(TableRecord.init(json:)),
            totalCount: response.header("x-total-count").flatMap { Int($0) },
            next: response.header("link").flatMap(LinkHeader.next)
        )
    }

    static func single(from response: HTTPResponseData) throws -> TableRecord {
        guard let result = try parse(response)["result"], case .object = result else {
            throw DocketError(kind: .decoding, message: "unexpected response from the instance", detail: "no result object")
        }
        return TableRecord(json: result)
    }

    static func parse(_ response: HTTPResponseData) throws -> JSONValue {
        do {
            return try JSONValue.parse(response.body)
        } catch {
            throw DocketError(kind: .decoding, message: "unexpected response from the instance", detail: "\(error)")
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, from response: HTTPResponseData) throws -> T {
        do {
            return try JSONDecoder().decode(ResultEnvelope<T>.self, from: response.body).result
        } catch {
            throw DocketError(kind: .decoding, message: "could not decode \(T.self)", detail: "\(error)")
        }
    }
}

/// `{"result": …}`, the Table API's success envelope.
struct ResultEnvelope<T: Decodable>: Decodable {
    var result: T
}

/// Pages of a list read, fetched as the sequence is iterated (see ``TableService/paginator(in:query:fields:pageSize:displayValue:concurrency:)``).
public struct RecordPaginator: AsyncSequence, Sendable {
    /// Each element is one page.
    public typealias Element = RecordPage

    let session: DocketSession
    let first: URL
    let concurrency: Int

    /// Fetches pages; requests still in flight are cancelled when it is released.
    public final class AsyncIterator: AsyncIteratorProtocol {
        private let session: DocketSession
        private let concurrency: Int
        private var first: URL?
        /// Sequential mode: the next link to follow.
        private var next: URL?
        /// Concurrent mode: pages not yet requested, and requests in flight, in order.
        private var planned: [URL] = []
        private var inFlight: [Task<RecordPage, any Error>] = []

        init(session: DocketSession, first: URL, concurrency: Int) {
            self.session = session
            self.first = first
            self.concurrency = concurrency
        }

        deinit { inFlight.forEach { $0.cancel() } }

        /// The next page, or nil after the last.
        public func next() async throws -> RecordPage? {
            if let url = first {
                first = nil
                let page = try await fetch(url)
                plan(after: page)
                return page
            }
            if concurrency > 1, !planned.isEmpty || !inFlight.isEmpty {
                let session = self.session
                while inFlight.count < concurrency, !planned.isEmpty {
                    let url = planned.removeFirst()
                    inFlight.append(Task { try TableService.page(from: try await session.send("GET", url: url)) })
                }
                let page = try await inFlight.removeFirst().value
                if page.records.isEmpty { stop() }
                return page
            }
            guard let url = next else { return nil }
            return try await fetch(url)
        }

        private func fetch(_ url: URL) async throws -> RecordPage {
            let page = try TableService.page(from: try await session.send("GET", url: url))
            // Stop on an empty page even if a next link came back, so a misbehaving server cannot loop us.
            next = page.records.isEmpty ? nil : page.next
            return page
        }

        /// Derives the remaining pages' URLs from the first page's next link and the total count.
        private func plan(after page: RecordPage) {
            guard concurrency > 1, let next = page.next, let total = page.totalCount,
                var components = URLComponents(url: next, resolvingAgainstBaseURL: false),
                let items = components.queryItems,
                let offset = items.first(where: { $0.name == "sysparm_offset" })?.value.flatMap({ Int($0) }),
                let limit = items.first(where: { $0.name == "sysparm_limit" })?.value.flatMap({ Int($0) }), limit > 0
            else { return }
            planned = stride(from: offset, to: total, by: limit).compactMap { start in
                components.queryItems = items.map {
                    $0.name == "sysparm_offset" ? URLQueryItem(name: $0.name, value: String(start)) : $0
                }
                return components.url
            }
            self.next = nil
        }

        private func stop() {
            planned = []
            inFlight.forEach { $0.cancel() }
            inFlight = []
        }
    }

    /// Starts iterating from the first page.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(session: session, first: first, concurrency: concurrency)
    }
}

/// Reads `rel="next"` from a `Link` header. URLs are taken between `<` and `>`, so commas inside them
/// (`sysparm_fields=number,state`) do not split entries.
enum LinkHeader {
    static func next(_ header: String) -> URL? {
        var rest = Substring(header)
        while let open = rest.firstIndex(of: "<"), let close = rest[open...].firstIndex(of: ">") {
            let url = rest[rest.index(after: open)..<close]
            let after = rest[rest.index(after: close)...]
            let parameters = after.prefix { $0 != "<" }
            if parameters.replacingOccurrences(of: " ", with: "").contains(#"rel="next""#) { return URL(string: String(url)) }
            rest = after
        }
        return nil
    }
}
