import DocketModel
import DocketTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import PostgresNIO
import Synchronization
import Testing

@testable import DocketServer

/// What the test client sends and receives, noted for the suite's secret scan (``SuiteLog``).
extension SuiteLog {
    /// Notes the credentials of a request's header fields and body.
    static func request(_ fields: HTTPFields, body: String?) {
        guard isOn else { return }
        if let authorization = fields[.authorization] {
            credential(authorization)
            if let space = authorization.firstIndex(of: " ") { credential(authorization[authorization.index(after: space)...]) }
        }
        for cookie in fields[values: .cookie] {
            for pair in cookie.split(separator: ";") { if let value = pair.split(separator: "=", maxSplits: 1).dropFirst().first { credential(value) } }
        }
        for pair in (body ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, ["password", "client_secret", "refresh_token", "code", "code_verifier", "token"].contains(String(parts[0])) {
                credential(parts[1].removingPercentEncoding ?? String(parts[1]))
            }
        }
    }

    /// Notes the tokens and cookies an answer handed out.
    static func response(_ response: TestResponse) {
        guard isOn else { return }
        for cookie in response.headers[values: .setCookie] {
            if let value = cookie.split(separator: ";").first?.split(separator: "=", maxSplits: 1).dropFirst().first { credential(value) }
        }
        guard response.headers[.contentType]?.contains("json") == true, let json = try? response.json else { return }
        for key in ["access_token", "refresh_token", "id_token"] {
            if let token = json[key]?.stringValue { credential(token) }
        }
    }
}

/// A throw-away data folder, removed when the test ends.
struct TemporaryDirectory: ~Copyable {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("docket-test-\(UUID().uuidString)").path
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// The storage tests run on: SQLite in the test's folder, or, when `DOCKET_TEST_POSTGRES_URL` names a
/// PostgreSQL database, a new schema of it for each test (the storage conformance run of `.ci/run`).
enum TestDatabase {
    /// Why the PostgreSQL-only suites are skipped, and how to run them (printed by `swift test`).
    static let postgresHint: Comment = """
        needs PostgreSQL: set DOCKET_TEST_POSTGRES_URL=postgres://USER@HOST:PORT/DATABASE?sslmode=disable (a role that \
        may create and drop schemas, on a server allowing about 100 connections; scripts/postgres-cluster.sh start \
        makes one and prints the URL). With it, every server suite runs on PostgreSQL instead of SQLite
        """

    static let postgres: PostgresLocation? = {
        guard let url = ProcessInfo.processInfo.environment["DOCKET_TEST_POSTGRES_URL"], !url.isEmpty else { return nil }
        guard case .postgres(let location) = try? StorageLocation(parsing: url) else {
            fatalError("DOCKET_TEST_POSTGRES_URL must be a postgres:// URL that docketd reads")
        }
        return location
    }()

    /// A fresh PostgreSQL location (its own schema), or nil when tests run on SQLite.
    static func freshPostgres() -> StorageLocation? {
        guard var location = postgres else { return nil }
        location.schema = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        return .postgres(location)
    }

    /// Opens the test storage: SQLite at `sqlitePath`, or a fresh PostgreSQL schema.
    static func open(sqlitePath: String, readers: Int = 2) async throws -> any Storage {
        if let location = freshPostgres() { return try await location.open(logger: Logger(label: "test")) }
        return try await SQLiteStorage.open(path: sqlitePath, readers: readers, logger: Logger(label: "test"))
    }

    /// A new PostgreSQL database that already holds the demo data: a copy of one seeded template, made by
    /// `CREATE DATABASE … TEMPLATE …`, which costs a fraction of creating and seeding the schema again.
    static func demoPostgres() async throws -> StorageLocation? {
        guard var location = postgres else { return nil }
        let template = try await DemoTemplate.shared.name()
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await DemoTemplate.maintenance(location) { runner in
            // A template may be copied only while nobody is connected to it; its builder's connections may
            // take a moment to go.
            for attempt in 1...50 {
                do {
                    try await runner.run("CREATE DATABASE " + .identifier(name) + " TEMPLATE " + .identifier(template))
                    return
                } catch where attempt < 50 && String(describing: error).contains("being accessed by other users") {
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
        }
        location.database = name
        location.schema = nil
        return .postgres(location)
    }

    /// Builds the demo template once per test process.
    actor DemoTemplate {
        static let shared = DemoTemplate()
        private var built: Task<String, any Error>?

        func name() async throws -> String {
            if let built { return try await built.value }
            let task = Task { try await Self.build() }
            built = task
            return try await task.value
        }

        private static func build() async throws -> String {
            guard var location = TestDatabase.postgres else { throw StorageLocationError("no PostgreSQL for tests") }
            let name = "docket_template_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            try await maintenance(location) { runner in try await runner.run("CREATE DATABASE " + .identifier(name)) }
            location.database = name
            location.schema = nil
            let storage = try await PostgresStorage.open(location, connections: 2, logger: Logger(label: "test"))
            let hasher = PasswordHasher(cost: 4)
            let (store, _) = try await RecordStore.open(storage: storage, logger: Logger(label: "test"), hashPassword: hasher.hash)
            try await DemoData.seed(store)
            // The signing keys too: every test would otherwise make its own RSA key.
            _ = try await SigningKeyStore.load(storage, secret: try await SigningKey.load(storage))
            await hasher.shutdown()
            try await storage.close()
            return name
        }

        /// Runs `body` on a connection to the database the test URL names.
        static func maintenance(_ location: PostgresLocation, _ body: (PostgresRunner) async throws -> Void) async throws {
            let connection = try await PostgresConnection.connect(
                configuration: try location.connectionConfiguration(searchPath: false), id: 1, logger: Logger(label: "test")
            )
            do {
                try await body(PostgresRunner(connection: connection, logger: Logger(label: "test")))
                try await connection.close()
            } catch {
                try? await connection.close()
                throw error
            }
        }
    }

    /// A new SQLite file at `path` that already holds the demo data: a copy of one file seeded once per test
    /// process (seeding in every test, with all tests starting at once, kept the two cores busy for most of
    /// a minute before the first test could run).
    static func demoSQLite(at path: String) async throws {
        let template = try await SQLiteTemplate.shared.path()
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true
        )
        try FileManager.default.copyItem(atPath: template, toPath: path)
        if FileManager.default.fileExists(atPath: template + "-wal") {
            try FileManager.default.copyItem(atPath: template + "-wal", toPath: path + "-wal")
        }
    }

    /// Seeds the SQLite demo template once per test process.
    actor SQLiteTemplate {
        static let shared = SQLiteTemplate()
        private var built: Task<String, any Error>?

        func path() async throws -> String {
            if let built { return try await built.value }
            let task = Task { try await Self.build() }
            built = task
            return try await task.value
        }

        private static func build() async throws -> String {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docket-template-" + UUID().uuidString)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let path = directory.appendingPathComponent("docket.sqlite").path
            let storage = try await SQLiteStorage.open(path: path, readers: 1, logger: Logger(label: "test"))
            let hasher = PasswordHasher(cost: 4)
            let (store, _) = try await RecordStore.open(storage: storage, logger: Logger(label: "test"), hashPassword: hasher.hash)
            do {
                try await DemoData.seed(store)
                // The signing keys too: every test would otherwise make its own RSA key.
                _ = try await SigningKeyStore.load(storage, secret: try await SigningKey.load(storage))
            } catch {
                try? await storage.close()
                throw error
            }
            await hasher.shutdown()
            // Closing the last connection checkpoints the log into the main file, which is then the database.
            try await storage.close()
            return path
        }
    }

    /// Opens the storage of a test configuration again (as a second process would).
    static func open(_ configuration: Configuration, readers: Int = 1) async throws -> any Storage {
        if case .sqlite(let path) = configuration.storageLocation {
            return try await SQLiteStorage.open(path: path, readers: readers, logger: Logger(label: "test"))
        }
        return try await configuration.storageLocation.open(logger: Logger(label: "test"))
    }
}

enum TestApp {
    /// A configuration for tests: its own data folder, a cheap bcrypt cost, demo data.
    static func configuration(dataDirectory: String, demo: Bool = true) -> Configuration {
        var configuration = Configuration(
            host: "127.0.0.1", port: 0, dataDirectory: dataDirectory, demo: demo, logLevel: .warning, bcryptCost: 4
        )
        configuration.database = TestDatabase.freshPostgres()
        SuiteLog.configure(&configuration)
        return configuration
    }

    /// ``configuration(dataDirectory:demo:)`` with demo data: a copy of the seeded template.
    static func demoConfiguration(dataDirectory: String) async throws -> Configuration {
        var configuration = configuration(dataDirectory: dataDirectory)
        if let copy = try await TestDatabase.demoPostgres() {
            configuration.database = copy
        } else {
            try await TestDatabase.demoSQLite(at: configuration.databasePath)
        }
        return configuration
    }

    /// Runs `test` against a freshly built demo app in-process.
    @discardableResult
    static func withRouter<T: Sendable>(
        demo: Bool = true, configure: (inout Configuration) -> Void = { _ in },
        _ test: @Sendable (any TestClientProtocol) async throws -> T
    ) async throws -> T {
        let directory = TemporaryDirectory()
        var configuration =
            demo ? try await demoConfiguration(dataDirectory: directory.path) : configuration(dataDirectory: directory.path, demo: false)
        configure(&configuration)
        let app = try await buildApplication(configuration)
        return try await app.test(.router, test)
    }

    /// The sign-in services on an engine (cheap bcrypt): an authenticator that follows the engine's changes, and
    /// OAuth. The hasher must be shut down after use.
    static func identity(on store: RecordStore) -> (identity: Identity, hasher: PasswordHasher) {
        let hasher = PasswordHasher(cost: 4)
        let authenticator = Authenticator(
            users: UserDirectory(store: store), hasher: hasher, credentialTTL: .seconds(60), sessionTimeout: .seconds(600)
        )
        store.broadcaster.add(observer: authenticator)
        let oauth = OAuthService(directory: OAuthDirectory(store: store), authenticator: authenticator, hasher: hasher)
        return (Identity(authenticator: authenticator, oauth: oauth), hasher)
    }

    /// An engine on a new demo database, for engine tests.
    @discardableResult
    static func withStore<T: Sendable>(_ test: @Sendable (RecordStore) async throws -> T) async throws -> T {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let copy = try await TestDatabase.demoPostgres()
        let storage: any Storage
        if let copy {
            storage = try await copy.open(logger: Logger(label: "test"))
        } else {
            try await TestDatabase.demoSQLite(at: directory.path + "/test.sqlite")
            storage = try await SQLiteStorage.open(path: directory.path + "/test.sqlite", readers: 2, logger: Logger(label: "test"))
        }
        do {
            let hasher = PasswordHasher(cost: 4)
            let (store, isNew) = try await RecordStore.open(storage: storage, logger: Logger(label: "test"), hashPassword: hasher.hash)
            if isNew { try await DemoData.seed(store) }
            let result = try await test(store)
            try await storage.close()
            return result
        } catch {
            try? await storage.close()
            throw error
        }
    }
}

extension EventLogFollower {
    /// Starts reading the first `count` events at once (in a task); its value is them, in order.
    func first(_ count: Int) -> Task<[ChangeEvent], any Error> {
        Task {
            var events: [ChangeEvent] = []
            for try await event in self {
                events.append(event)
                if events.count == count { break }
            }
            return events
        }
    }
}

/// Demo users' callers, as the engine sees them.
enum Callers {
    static let john = Caller(userID: DemoData.userID("john.doe"), userName: "john.doe", displayName: "John Doe", roles: ["itil"])
    static let beth = Caller(userID: DemoData.userID("beth.anglin"), userName: "beth.anglin", displayName: "Beth Anglin", roles: ["itil"])
    static let abel = Caller(userID: DemoData.userID("abel.tuter"), userName: "abel.tuter", displayName: "Abel Tuter", roles: [])
    static let admin = Caller(userID: DemoData.userID("admin"), userName: "admin", displayName: "System Administrator", roles: ["admin"])
}

extension HTTPFields {
    static func basic(_ user: String, _ password: String) -> HTTPFields {
        [.authorization: "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()]
    }

    static var john: HTTPFields { basic("john.doe", "password") }
    static var admin: HTTPFields { basic("admin", "admin") }
    static var abel: HTTPFields { basic("abel.tuter", "password") }
    static var beth: HTTPFields { basic("beth.anglin", "password") }

    static func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer " + token] }

    static func json(_ base: HTTPFields) -> HTTPFields {
        var fields = base
        fields[.contentType] = "application/json"
        return fields
    }
}

extension TestResponse {
    /// The body parsed as JSON.
    var json: JSONValue {
        get throws { try JSONValue.parse(Data(body.readableBytesView)) }
    }

    var text: String { String(buffer: body) }

    /// `result` as an array (list endpoints).
    var results: [JSONValue] {
        get throws { try json["result"]?.arrayValue ?? [] }
    }

    /// `result` as an object (single-record endpoints).
    var result: JSONValue {
        get throws { try json["result"] ?? .null }
    }

    /// The ServiceNow error message.
    var errorMessage: String? {
        (try? json)?["error"]?["message"]?.stringValue
    }
}

extension TestClientProtocol {
    @discardableResult
    func get(_ uri: String, _ headers: HTTPFields = .john) async throws -> TestResponse {
        SuiteLog.request(headers, body: nil)
        let response = try await execute(uri: uri, method: .get, headers: headers, body: nil)
        SuiteLog.response(response)
        return response
    }

    @discardableResult
    func send(
        _ method: HTTPRequest.Method, _ uri: String, json: String?, headers: HTTPFields = .john
    ) async throws -> TestResponse {
        SuiteLog.request(headers, body: nil)
        let response = try await execute(
            uri: uri, method: method, headers: .json(headers), body: json.map { ByteBuffer(string: $0) }
        )
        SuiteLog.response(response)
        return response
    }
}

extension TestClientProtocol {
    /// A form-encoded POST (the OAuth token endpoint).
    func form(_ uri: String, _ body: String, headers: HTTPFields = [:]) async throws -> TestResponse {
        var fields = headers
        fields[.contentType] = "application/x-www-form-urlencoded"
        SuiteLog.request(fields, body: body)
        let response = try await execute(uri: uri, method: .post, headers: fields, body: ByteBuffer(string: body))
        SuiteLog.response(response)
        return response
    }

    /// A password grant for a demo user with the demo client; returns the token response.
    func passwordGrant(_ user: String = "john.doe", _ password: String = "password") async throws -> JSONValue {
        try await form(
            "/oauth_token.do",
            "grant_type=password&client_id=docket-demo&client_secret=docket-demo-secret&username=\(user)&password=\(password)"
        ).json
    }
}

extension JSONValue {
    /// A string member of an object, or "" (for terse assertions).
    func string(_ key: String) -> String { self[key]?.stringValue ?? "" }
}

/// Demo records the tests name.
enum Demo {
    /// INC0010001: abel.tuter is its caller.
    static let incident1 = DemoData.id("incident", 1)
    /// INC0010003: abel.tuter is not involved.
    static let incident3 = DemoData.id("incident", 3)
}
