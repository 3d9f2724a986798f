import ArgumentParser
import DocketKit
import DocketModel
import Foundation

struct RecordsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "records", abstract: "List records of any table through the Table API.",
        discussion: """
            Without --fields the table's useful columns are shown (number, short description or name, state, \
            priority, assigned to), with display values: names and labels instead of sys_ids and codes.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Table name (incident, sys_user, …).")
    var table: String

    @Option(help: "Encoded query, e.g. 'active=true^priority<=2^ORDERBYnumber'.")
    var query: String?

    @Option(help: "Comma-separated fields to return.")
    var fields: String?

    @Option(help: "Most records to return (pages are fetched until this many).")
    var limit = 100

    @Option(help: "Records per request.")
    var pageSize = 1000

    @Option(help: "Page requests in flight at once (1 follows Link headers one page at a time).")
    var concurrency = 2

    @Option(help: "true, false or all (default: all for the table, false with --json).")
    var displayValue: String?

    @OptionGroup var output: OutputOptions

    func validate() throws {
        guard limit > 0 else { throw ValidationError("--limit must be at least 1") }
        guard pageSize > 0 else { throw ValidationError("--page-size must be at least 1") }
        guard (1...8).contains(concurrency) else { throw ValidationError("--concurrency must be from 1 to 8") }
        if let displayValue, DisplayValue(rawValue: displayValue) == nil {
            throw ValidationError("--display-value must be true, false or all")
        }
        if let query {
            do { _ = try EncodedQuery(query) } catch { throw ValidationError("--query: \(error.message)") }
        }
    }

    func run() async throws {
        let environment = CLIEnvironment.current
        let client = try connection.serviceNowClient("records")
        let fieldList = fields?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        // The Table API drops a condition on an unknown field and lists everything: a typo is said here instead.
        if let query, !query.isEmpty {
            do {
                try await ServiceNowBackend(client: client).checkQuery(try EncodedQuery(query), in: table)
            } catch let error as DocketError where error.kind == .invalidRequest {
                throw CLIFailure("--query: \(error.message)")
            }
        }
        let pages = client.table.paginator(
            in: table, query: try query.map(EncodedQuery.init), fields: fieldList, pageSize: min(pageSize, limit),
            displayValue: displayValue.flatMap(DisplayValue.init(rawValue:)) ?? (output.json ? .false : .all),
            concurrency: concurrency
        )
        var records: [TableRecord] = []
        var total: Int?
        for try await page in pages {
            records += page.records
            total = total ?? page.totalCount
            if environment.stderrIsTerminal, (total ?? 0) > page.records.count {
                environment.err("\rFetched \(min(records.count, limit)) of \(min(total ?? limit, limit)) records…")
            }
            if records.count >= limit { break }
        }
        if environment.stderrIsTerminal, (total ?? 0) > pageSize { environment.err("\n") }
        records = Array(records.prefix(limit))
        if output.json {
            var writer = JSONWriter(capacity: 256 * records.count)
            writer.beginArray()
            for record in records { writer.value(record.json) }
            writer.endArray()
            environment.out(String(decoding: writer.bytes, as: UTF8.self) + "\n")
            return
        }
        guard let first = records.first else {
            environment.print("No records.")
            return
        }
        let columns = fieldList ?? Self.usefulColumns(of: first)
        let rows = records.map { record in columns.map { record.displayValue($0) ?? "" } }
        let widths = columns.indices.map { index in
            min(40, max(columns[index].count, rows.map { $0[index].count }.max() ?? 0))
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                let clipped = cell.count > widths[index] ? String(cell.prefix(widths[index] - 1)) + "…" : cell
                return clipped.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }
        environment.print(line(columns))
        for row in rows { environment.print(line(row)) }
        if let total, total > records.count { environment.print("(\(records.count) of \(total))") }
    }

    /// The columns a person looks for first, those of them the table has; its first own fields when it has few.
    static let preferred = [
        "number", "short_description", "name", "user_name", "label", "title", "element", "state", "priority",
        "assigned_to", "active",
    ]

    static func usefulColumns(of record: TableRecord) -> [String] {
        let names = record.fieldNames
        var columns = preferred.filter(names.contains)
        for name in names where columns.count < 4 && !name.hasPrefix("sys_") && !columns.contains(name) {
            columns.append(name)
        }
        if columns.isEmpty { columns = ["sys_id"] }
        return Array(columns.prefix(6))
    }
}
