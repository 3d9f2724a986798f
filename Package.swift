// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Docket",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "DocketModel", targets: ["DocketModel"]),
        .library(name: "DocketServer", targets: ["DocketServer"]),
        .executable(name: "docketd", targets: ["docketd"]),
        .library(name: "DocketKit", targets: ["DocketKit"]),
        .library(name: "DocketOffline", targets: ["DocketOffline"]),
        .executable(name: "docket", targets: ["docket"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/vapor/sql-kit.git", from: "3.36.0"),
        .package(url: "https://github.com/vapor/sqlite-kit.git", from: "4.5.2"),
        .package(url: "https://github.com/vapor/postgres-kit.git", from: "2.17.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.1.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/vapor/multipart-kit.git", from: "4.7.1"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/GraphQLSwift/GraphQL.git", from: "4.3.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
        .package(url: "https://github.com/swift-extras/swift-extras-base64.git", from: "1.2.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // Only the OTLP/HTTP exporter: the gRPC one would build grpc-swift for nothing.
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        .target(
            name: "DocketModel", dependencies: [.product(name: "OrderedCollections", package: "swift-collections")]
        ),
        // Sets SQLite's one global option the server changes (how much of a savepoint journal stays in memory),
        // through a C function: `sqlite3_config` takes a variable argument list, which Swift cannot call.
        .target(name: "CDocketSQLite"),
        .target(
            name: "DocketServer",
            dependencies: [
                "DocketModel", "CDocketSQLite",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "MultipartKit", package: "multipart-kit"),
                .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "SQLiteKit", package: "sqlite-kit"),
                .product(name: "PostgresKit", package: "postgres-kit"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GraphQL", package: "GraphQL"),
                .product(name: "OrderedCollections", package: "swift-collections"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
                // Outgoing HTTP: the discovery documents and key sets of trusted OpenID providers.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // `GET /metrics`: Prometheus's text format.
                .product(name: "Prometheus", package: "swift-prometheus"),
                // Traces: spans through swift-distributed-tracing, exported over OTLP/HTTP by swift-otel.
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
            ],
            // The web UI's templates, styles and script (``WebResources``): a bundle next to the built binary.
            resources: [.copy("WebResources")]
        ),
        .executableTarget(
            name: "docketd",
            dependencies: [
                "DocketServer", "DocketModel",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // WebSockets: URLSessionWebSocketTask on Apple platforms, swift-websocket's client on Linux (where
        // URLSession's WebSocket support is unreliable).
        .target(
            name: "DocketKit",
            dependencies: [
                "DocketModel",
                // SHA-256 for PKCE (CryptoKit's API on every platform).
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "WSClient", package: "swift-websocket", condition: .when(platforms: [.linux])),
                // HTTP for Linux when a private CA is trusted (URLSession there trusts only the system's store).
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(platforms: [.linux])),
            ]
        ),
        // Offline-first: records, an outbox of writes and the event log cursor in one SQLite file per account (GRDB).
        .target(
            name: "DocketOffline",
            dependencies: ["DocketKit", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .target(
            name: "DocketCLI",
            dependencies: [
                "DocketKit", "DocketModel", "DocketOffline", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // The loopback listener `docket login --sso --browser` receives the browser's answer on.
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .executableTarget(name: "docket", dependencies: ["DocketCLI"]),
        // The reading side of Benchmarks/live-fanout.py for WebSockets.
        .executableTarget(
            name: "live-fanout-client",
            path: "Benchmarks/LiveFanoutClient"
        ),
        .testTarget(name: "DocketModelTests", dependencies: ["DocketModel"]),
        // Bounds how many tests run at once (see its source), for every test of the one test binary.
        .target(name: "TestParallelism", path: "Tests/TestParallelism"),
        // Runs a live docketd for the SDK and CLI end-to-end tests.
        .target(
            name: "DocketTestSupport",
            dependencies: [
                "TestParallelism", "DocketServer", .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/DocketTestSupport"
        ),
        .testTarget(name: "DocketKitTests", dependencies: ["DocketKit", "DocketTestSupport"]),
        .testTarget(name: "DocketCLITests", dependencies: ["DocketCLI", "DocketTestSupport"]),
        .testTarget(name: "DocketOfflineTests", dependencies: ["DocketOffline", "DocketTestSupport"]),
        // The client Tests/Offline/kill_client.py kills with SIGKILL mid-writes.
        .executableTarget(name: "offline-writer", dependencies: ["DocketOffline"], path: "Tests/OfflineWriter"),
        .testTarget(
            name: "DocketServerTests",
            dependencies: [
                "DocketServer", "DocketKit", "DocketTestSupport", "CDocketSQLite",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "GraphQL", package: "GraphQL"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            // A database made by an older docketd, read by UpgradeTests from its place in the sources.
            exclude: ["Engine/Fixtures"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
