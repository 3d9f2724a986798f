import DocketModel
import Foundation
import Logging
import OrderedCollections
import Synchronization

/// `--log-format json`: one JSON object a line, for log shippers (Loki, Elasticsearch, journald's JSON readers):
/// `time` (UTC, milliseconds), `level`, `message`, `logger`, then the line's metadata as members (`request_id`,
/// `user`, `dialect`, `route`, `status`, `duration_ms` on a request's line). Nested metadata stays nested; values
/// are strings.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let output: Output

    /// Where lines go: standard error (in batches: ``LogOutput``), or (tests) a function.
    typealias Output = LogOutput

    public init(label: String) { self.init(label: label, output: .standardError) }

    /// Lines go to `write`, one call per line (its text ends with a newline); handlers made separately may call it
    /// at once, so it orders its own writes.
    public init(label: String, write: @escaping @Sendable ([UInt8]) -> Void) {
        self.init(label: label, output: Output(write))
    }

    init(label: String, output: Output) {
        self.label = label
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Metadata keys as they appear in the line.
    static func name(of key: String) -> String { key == RequestIDs.metadataKey ? "request_id" : key }

    public func log(event: LogEvent) {
        let all = LogOutput.metadata(metadata, provider: metadataProvider, event: event)
        var writer = JSONWriter(capacity: 256)
        writer.beginObject()
        writer.key("time")
        writer.string(Self.timestamp(Date()))
        writer.key("level")
        writer.string(event.level.rawValue)
        writer.key("message")
        writer.string(event.message.description)
        writer.key("logger")
        writer.string(label)
        for key in all.keys.sorted() where !["time", "level", "message", "logger"].contains(Self.name(of: key)) {
            writer.key(Self.name(of: key))
            writer.value(Self.json(all[key]!))
        }
        writer.endObject()
        output.line(writer.bytes + [UInt8(ascii: "\n")], level: event.level)
    }

    static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let text): return .string(text)
        case .stringConvertible(let value): return .string(value.description)
        case .array(let values): return .array(values.map(json))
        case .dictionary(let values):
            return .object(OrderedDictionary(uniqueKeysWithValues: values.sorted { $0.key < $1.key }.map { ($0.key, json($0.value)) }))
        }
    }

    /// `2026-11-26T21:43:05.123Z`.
    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
