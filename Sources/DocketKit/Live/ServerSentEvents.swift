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
/// a byte order mark at the start of the stream is skipped, lines end with CR, LF or CRLF (also when split across
/// chunks), comments start with a colon, a blank line dispatches the message, a message without data is not
/// dispatched (nor one the stream ends in), an `id` with NUL is ignored and `retry` is read only when it is all
/// digits. Lines are bounded, so a server cannot make the reader hold unbounded memory.
///
/// Checked against mattt/EventSource 1.1.1's parser, whose test vectors it passes where that parser follows the
/// standard; it is kept rather than replaced because that one dispatches messages without data and the message a
/// stream ends in, skips a byte order mark on every line, holds unbounded lines, and hops to an actor per byte.
public struct ServerSentEventParser: Sendable {
    /// The longest line kept, in bytes; longer lines are cut.
    public static let maximumLineLength = 4 * 1024 * 1024

    private var line: [UInt8] = []
    private var lastWasCR = false
    /// Bytes of the stream's start still compared with a byte order mark (EF BB BF).
    private var bomMatched = 0
    private var atStart = true
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
            if atStart {
                // A byte order mark (EF BB BF) that begins the stream is no part of its first line.
                let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
                if byte == bom[bomMatched] {
                    bomMatched += 1
                    if bomMatched == bom.count { atStart = false }
                    continue
                }
                atStart = false
                line.append(contentsOf: bom[..<bomMatched])
            }
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
        case "retry" where !value.isEmpty && value.utf8.allSatisfy({ (0x30...0x39).contains($0) }): retry = Int(value)
        default: break
        }
        return nil
    }
}
