import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing

@testable import DocketServer

/// A throw-away data folder, removed when the test ends.
struct TemporaryDirectory: ~Copyable {
    let path: String

    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("docket-test-\(UUID().uuidString)").path
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

enum TestApp {
    /// A configuration for tests: its own data folder, a cheap bcrypt cost, demo data.
    static func configuration(dataDirectory: String, demo: Bool = true) -> Configuration {
        Configuration(host: "127.0.0.1", port: 0, dataDirectory: dataDirectory, demo: demo, logLevel: .warning, bcryptCost: 4)
    }

    /// Runs `test` against a freshly built demo app in-process.
    @discardableResult
    static func withRouter<T: Sendable>(
        demo: Bool = true, configure: (inout Configuration) -> Void = { _ in },
        _ test: @Sendable (any TestClientProtocol) async throws -> T
    ) async throws -> T {
        let directory = TemporaryDirectory()
        var configuration = configuration(dataDirectory: directory.path, demo: demo)
        configure(&configuration)
        let app = try await buildApplication(configuration)
        return try await app.test(.router, test)
    }

    /// An engine on a new demo database, for engine tests.
    @discardableResult
    static func withStore<T: Sendable>(_ test: @Sendable (RecordStore) async throws -> T) async throws -> T {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let storage = try await SQLiteStorage.open(
            path: directory.path + "/test.sqlite", readers: 2, logger: Logger(label: "test")
        )
        do {
            let hasher = PasswordHasher(cost: 4)
            let (store, _) = try await RecordStore.open(storage: storage, logger: Logger(label: "test"), hashPassword: hasher.hash)
            try await DemoData.seed(store)
            let result = try await test(store)
            try await storage.close()
            return result
        } catch {
            try? await storage.close()
            throw error
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
        try await execute(uri: uri, method: .get, headers: headers, body: nil)
    }

    @discardableResult
    func send(
        _ method: HTTPRequest.Method, _ uri: String, json: String?, headers: HTTPFields = .john
    ) async throws -> TestResponse {
        try await execute(
            uri: uri, method: method, headers: .json(headers), body: json.map { ByteBuffer(string: $0) }
        )
    }
}

extension TestClientProtocol {
    /// A form-encoded POST (the OAuth token endpoint).
    func form(_ uri: String, _ body: String, headers: HTTPFields = [:]) async throws -> TestResponse {
        var fields = headers
        fields[.contentType] = "application/x-www-form-urlencoded"
        return try await execute(uri: uri, method: .post, headers: fields, body: ByteBuffer(string: body))
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
