import Foundation

/// One Server-Sent Event: the fields of one message of a `text/event-stream`.
public struct ServerSentEvent: Sendable, Equatable {
    /// `event:`; nil for the default type (`message`).
    public var event: String?
    /// `id:`, the last one seen in the stream (the event's own, or an earlier one).
    public var id: String?
    /// `data:`, its lines joined with newlines.
    public var data: String
    /// `retry:`, the reconnection time the server asks for, in milliseconds.
    public var retry: Int?

    /// Creates an event.
    public init(event: String? = nil, id: String? = nil, data: String = "", retry: Int? = nil) {
        self.event = event
        self.id = id
        self.data = data
        self.retry = retry
    }
}

/// Reads a `text/event-stream` incrementally, as the HTML standard's event-stream interpretation describes:
/// lines end with CR, LF or CRLF (also when split across chunks), comments start with a colon, a blank line
/// dispatches the message, and a message without data is not dispatched. Lines are bounded, so a server
/// cannot make the reader hold unbounded memory.
public struct ServerSentEventParser: Sendable {
    /// The longest line kept, in bytes; longer lines are cut.
    public static let maximumLineLength = 4 * 1024 * 1024

    private var line: [UInt8] = []
    private var lastWasCR = false
    private var event: String?
    private var data: [String] = []
    private var hasData = false
    private var retry: Int?
    /// The last event id set by the stream (kept across messages, as `EventSource` does).
    public private(set) var lastEventID: String?

    /// Creates a parser.
    public init() {}

    /// Feeds bytes; returns the messages they completed.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if byte == 0x0A, lastWasCR {
                lastWasCR = false
                continue
            }
            lastWasCR = byte == 0x0D
            if byte == 0x0A || byte == 0x0D {
                if let event = endLine() { events.append(event) }
            } else if line.count < Self.maximumLineLength {
                line.append(byte)
            }
        }
        return events
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            defer {
                event = nil
                data = []
                hasData = false
                retry = nil
            }
            guard hasData else { return nil }
            return ServerSentEvent(event: event, id: lastEventID, data: data.joined(separator: "\n"), retry: retry)
        }
        if line.first == UInt8(ascii: ":") { return nil }
        let text = String(decoding: line, as: UTF8.self)
        let name: Substring
        var value: Substring
        if let colon = text.firstIndex(of: ":") {
            name = text[..<colon]
            value = text[text.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
        } else {
            name = Substring(text)
            value = ""
        }
        switch name {
        case "event": event = String(value)
        case "data":
            data.append(String(value))
            hasData = true
        case "id" where !value.contains("\0"): lastEventID = String(value)
        case "retry": retry = Int(value)
        default: break
        }
        return nil
    }
}
