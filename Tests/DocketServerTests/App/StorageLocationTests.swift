import Testing

@testable import DocketServer

/// `--database` / `DOCKET_DATABASE_URL`: what docketd accepts, what it refuses, and that no password is shown.
@Suite("Database locations")
struct StorageLocationTests {
    @Test("sqlite: paths and PostgreSQL URLs with their options")
    func parsing() throws {
        #expect(try StorageLocation(parsing: "sqlite:/var/lib/docket/d.sqlite") == .sqlite(path: "/var/lib/docket/d.sqlite"))
        #expect(try StorageLocation(parsing: "sqlite:relative.sqlite") == .sqlite(path: "relative.sqlite"))
        guard case .postgres(let full) = try StorageLocation(parsing: "postgres://docket:s%40cret@db.internal:6543/work?schema=team_a&sslmode=require")
        else { Issue.record("not PostgreSQL"); return }
        #expect(full.user == "docket")
        #expect(full.password == "s@cret")
        #expect(full.host == "db.internal")
        #expect(full.port == 6543)
        #expect(full.database == "work")
        #expect(full.schema == "team_a")
        #expect(full.tls == .require)
        guard case .postgres(let plain) = try StorageLocation(parsing: "postgresql://me@localhost/db") else {
            Issue.record("not PostgreSQL"); return
        }
        #expect(plain.port == 5432)
        #expect(plain.password == nil)
        #expect(plain.schema == nil)
        #expect(plain.tls == .prefer)
        #expect(plain.prepare)
        guard case .postgres(let unprepared) = try StorageLocation(parsing: "postgres://me@localhost/db?prepare=off") else {
            Issue.record("not PostgreSQL"); return
        }
        #expect(!unprepared.prepare)
        #expect(unprepared.redacted == "postgres://me@localhost:5432/db?prepare=off")
        guard case .postgres(let socket) = try StorageLocation(parsing: "postgres://me@/db?host=/run/postgresql") else {
            Issue.record("not PostgreSQL"); return
        }
        #expect(socket.socketDirectory == "/run/postgresql")
    }

    @Test("malformed locations are refused with a sentence that says what is expected", arguments: [
        "", "docket.sqlite", "mysql://root@db/x", "sqlite:", "postgres://u@h:0/db", "postgres://u@h/db?schema=Bad-Name",
        "postgres://u@h/db?sslmode=sometimes", "postgres://u@h/db?pool=3", "postgres://u@h/db?schema=",
        "postgres://u@h/db?prepare=yes",
    ])
    func refused(_ text: String) {
        #expect(throws: StorageLocationError.self) { try StorageLocation(parsing: text) }
    }

    @Test("no password is ever shown")
    func redaction() throws {
        let location = try StorageLocation(parsing: "postgres://docket:hunter2@db:5432/work?schema=s")
        #expect(location.redacted == "postgres://docket:***@db:5432/work?schema=s")
        let refused = #expect(throws: StorageLocationError.self) { try StorageLocation(parsing: "mysql://root:hunter2@db/x") }
        #expect(refused?.description.contains("hunter2") == false)
    }
}
