import Foundation
import Logging
import NIOSSL
import PostgresNIO

/// Where docketd keeps its data: an SQLite file (the default, in the data folder) or a PostgreSQL database.
public enum StorageLocation: Sendable, Equatable {
    case sqlite(path: String)
    case postgres(PostgresLocation)

    /// Reads `sqlite:PATH`, `postgres://…` or `postgresql://…`.
    public init(parsing text: String) throws(StorageLocationError) {
        if text.hasPrefix("sqlite:") {
            var path = String(text.dropFirst("sqlite:".count))
            if path.hasPrefix("//") { path.removeFirst(2) }
            guard !path.isEmpty else { throw .init("sqlite: needs a file path, as in sqlite:/var/lib/docket/docket.sqlite") }
            self = .sqlite(path: path)
        } else if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            self = .postgres(try PostgresLocation(parsing: text))
        } else {
            throw .init("A database is sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE, not '\(Self.redact(text))'")
        }
    }

    /// The location as it may be logged: without a password.
    public var redacted: String {
        switch self {
        case .sqlite(let path): return "sqlite:" + path
        case .postgres(let location): return location.redacted
        }
    }

    /// Opens the storage.
    func open(logger: Logger) async throws -> any Storage {
        switch self {
        case .sqlite(let path): return try await SQLiteStorage.open(path: path, logger: logger)
        case .postgres(let location): return try await PostgresStorage.open(location, logger: logger)
        }
    }

    static func redact(_ text: String) -> String {
        guard let scheme = text.range(of: "://"), let at = text.range(of: "@", range: scheme.upperBound..<text.endIndex)
        else { return text }
        let credentials = text[scheme.upperBound..<at.lowerBound]
        guard let colon = credentials.firstIndex(of: ":") else { return text }
        return String(text[..<colon]) + ":***" + String(text[at.lowerBound...])
    }
}

public struct StorageLocationError: Error, CustomStringConvertible, Equatable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// A PostgreSQL database named by a URL: `postgres://USER:PASSWORD@HOST:PORT/DATABASE?schema=S&sslmode=M`.
///
/// - `schema`: the schema docketd keeps its tables in (created when missing); by default the server's search
///   path decides (normally `public`).
/// - `sslmode`: `disable`, `prefer` (the default: TLS when the server offers it) or `require` (TLS with the
///   server's certificate verified against the system's trust roots).
/// - `host=/DIRECTORY` as a query item connects through the Unix socket in that folder instead of TCP.
/// - `prepare`: `on` (the default: statements run again and again are prepared, see ``PreparedStatements``) or
///   `off` (every statement parsed on each run: for a pooler that does not keep named statements, such as
///   PgBouncer before 1.21; a pooler must give docketd sessions, not transactions, for its listener and its
///   presence key, ``PostgresPresence``).
public struct PostgresLocation: Sendable, Equatable {
    public enum TLSMode: String, Sendable { case disable, prefer, require }

    public var host: String
    public var port: Int
    public var socketDirectory: String?
    public var user: String
    public var password: String?
    public var database: String?
    public var schema: String?
    public var tls: TLSMode
    public var prepare = true

    init(parsing text: String) throws(StorageLocationError) {
        guard let components = URLComponents(string: text) else {
            throw .init("Not a valid PostgreSQL URL: '\(StorageLocation.redact(text))'")
        }
        var items: [String: String] = [:]
        for item in components.queryItems ?? [] { items[item.name] = item.value ?? "" }
        let known: Set = ["schema", "sslmode", "host", "prepare"]
        if let unknown = items.keys.sorted().first(where: { !known.contains($0) }) {
            throw .init("Unknown PostgreSQL URL option '\(unknown)'; docketd reads schema, sslmode, host and prepare")
        }
        socketDirectory = items["host"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        host = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1"
        port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw .init("A PostgreSQL port is between 1 and 65535") }
        user = components.user.flatMap { $0.removingPercentEncoding } ?? "postgres"
        password = components.password.flatMap { $0.removingPercentEncoding }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.isEmpty ? nil : path.removingPercentEncoding
        schema = items["schema"]
        if let schema, schema.isEmpty || !SQLFragment.isPlain(schema) {
            throw .init("A schema name is lower-case letters, digits and underscores, not '\(schema)'")
        }
        let mode = items["sslmode"] ?? "prefer"
        switch mode {
        case "disable": tls = .disable
        case "prefer", "allow": tls = .prefer
        case "require", "verify-ca", "verify-full": tls = .require
        default: throw .init("Unknown sslmode '\(mode)'; use disable, prefer or require")
        }
        switch items["prepare"] ?? "on" {
        case "on": prepare = true
        case "off": prepare = false
        case let other: throw .init("Unknown prepare '\(other)'; use on or off")
        }
    }

    /// The URL without its password.
    public var redacted: String {
        var text = "postgres://" + user + (password == nil ? "" : ":***") + "@"
        text += socketDirectory == nil ? "\(host):\(port)" : ""
        text += "/" + (database ?? "")
        var options: [String] = []
        if let schema { options.append("schema=" + schema) }
        if let socketDirectory { options.append("host=" + socketDirectory) }
        if !prepare { options.append("prepare=off") }
        return options.isEmpty ? text : text + "?" + options.joined(separator: "&")
    }

    private var socketPath: String? { socketDirectory.map { $0 + "/.s.PGSQL.\(port)" } }

    private var startupParameters: [(String, String)] {
        // `lock_timeout` bounds every wait for a lock (an exclusive write's advisory lock, a record's row): a write
        // stuck ahead makes the next ones fail with 503, never hang. Not through a pooler (`prepare=off`): PgBouncer
        // refuses startup parameters it does not know, and its server connections are shared; each transaction
        // sets it there (``PostgresStorage``).
        var parameters = [("application_name", "docketd")]
        if prepare { parameters.append(("lock_timeout", PostgresStorage.lockTimeout)) }
        if let schema { parameters.append(("search_path", schema)) }
        return parameters
    }

    func connectionConfiguration(searchPath: Bool) throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        if let socketPath {
            configuration = .init(unixSocketPath: socketPath, username: user, password: password, database: database)
        } else {
            let tls: PostgresConnection.Configuration.TLS
            switch self.tls {
            case .disable: tls = .disable
            case .prefer: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            case .require: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
            configuration = .init(host: host, port: port, username: user, password: password, database: database, tls: tls)
        }
        configuration.options.additionalStartupParameters = searchPath ? startupParameters : [("application_name", "docketd")]
        // A server that does not answer is an outage to report, not something to wait ten seconds for.
        configuration.options.connectTimeout = .seconds(3)
        return configuration
    }
}
