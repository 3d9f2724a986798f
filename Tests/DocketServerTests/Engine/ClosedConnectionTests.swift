import Logging
import PostgresNIO
import Testing

@testable import DocketServer

/// postgres-nio drops a statement handed to a connection that has closed, and its answer never comes: the runner
/// fails it first.
@Suite(
    "A statement on a closed PostgreSQL connection", .enabled(if: TestDatabase.postgres != nil, TestDatabase.postgresHint),
    .timeLimit(.minutes(1))
)
struct ClosedConnectionTests {
    @Test("fails at once with StorageUnavailable (answered 503), rather than waiting for an answer that cannot come")
    func closedConnection() async throws {
        guard case .postgres(let location) = try #require(TestDatabase.freshPostgres()) else {
            Issue.record("no PostgreSQL location")
            return
        }
        let connection = try await PostgresConnection.connect(
            configuration: try location.connectionConfiguration(searchPath: false), id: 1, logger: Logger(label: "test")
        )
        let runner = PostgresRunner(connection: connection, logger: Logger(label: "test"))
        #expect(try await runner.rows("SELECT 1 AS one").first?.value(at: "one", kind: .integer).intValue == 1)
        try await connection.close()
        await #expect(throws: StorageUnavailable.self) { try await runner.rows("SELECT 1 AS one") }
    }
}
