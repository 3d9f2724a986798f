import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where docketd's log lines go: a file descriptor (standard error), in batches. Lines below `warning` (the request
/// line among them) are written by a thread of the output's own at most ``flushDelay`` later, together with those
/// logged meanwhile: under load many lines cost one system call instead of one each. A line at `warning` or above
/// is written at once with every line logged before it: by its caller when nobody is writing (one write; what is
/// logged meanwhile is handed to the thread, which then writes without waiting), or else by the write under way,
/// which takes it next. At exit (`exit`, or `main` returning) what is pending is written (``flush()``, bounded by a
/// second). A process that crashes or is killed loses what was not written yet: normally the last ``flushDelay`` of
/// lines below `warning`, and a warning that waited behind a write under way. While standard error blocks, at most
/// ``maximumPending`` bytes wait, and lines beyond are dropped and counted.
final class LogOutput: Sendable {
    private struct State {
        var pending: [UInt8] = []
        var writing = false
        /// The flushing thread was woken for what is pending and has not taken it yet.
        var flushDue = false
        /// What is pending follows a warning: the thread writes it without waiting for more.
        var urgent = false
        /// Lines dropped since the last write (the buffer was full: standard error does not keep up).
        var dropped = 0
    }

    /// The most bytes waiting to be written: when standard error blocks (a stalled log reader), lines beyond it are
    /// dropped and counted, and a line saying how many follows when writing goes on, rather than the server's memory
    /// growing. A single longer line is taken when nothing else waits. (The one writing meanwhile waits in `write`: the
    /// thread, or the caller of a warning, which waits as long as standard error does.)
    static let maximumPending = 4 << 20

    /// How long a line below `warning` may wait for others to share its write (microseconds).
    static let flushDelay: useconds_t = 2_000

    private let state = Mutex(State())
    /// Where batches go (a descriptor), or nil when each line goes to `perLine`.
    private let descriptor: Int32?
    private let perLine: (@Sendable ([UInt8]) -> Void)?
    private let ordering = Mutex(())
    /// Wakes the flushing thread (signalled by the line that finds nothing due, or by a warning's hand-off).
    private let due = DispatchSemaphore(value: 0)
    /// Cuts the thread's wait for more lines short: a warning's hand-off came (signalled once per wake at most).
    private let hurry = DispatchSemaphore(value: 0)

    /// Lines go to `descriptor`, in batches, through a thread of the output's own that lives as long as the process
    /// (docketd makes one output, for standard error).
    init(descriptor: Int32) {
        self.descriptor = descriptor
        perLine = nil
        // A thread rather than a task: the flush must not wait behind request work for a thread of the pool.
        let thread = Thread { [self] in
            while true {
                due.wait()
                if !state.withLock({ $0.urgent }) {
                    _ = hurry.wait(timeout: .now() + .microseconds(Int(Self.flushDelay)))
                }
                state.withLock { state in
                    state.flushDue = false
                    state.urgent = false
                }
                // A hand-off's signal that came after the wait was over is answered by this drain too.
                while hurry.wait(timeout: .now()) == .success {}
                drain()
            }
        }
        thread.name = "docketd log"
        thread.start()
    }

    /// Lines go to `write` (tests, the suite's log file), one call per line, one call at a time, each before its
    /// caller returns.
    init(_ write: @escaping @Sendable ([UInt8]) -> Void) {
        descriptor = nil
        perLine = write
    }

    /// Standard error; what is pending is written when the process exits.
    static let standardError: LogOutput = {
        let output = LogOutput(descriptor: 2)
        atexit { LogOutput.standardError.flush() }
        return output
    }()

    /// A line's metadata: the handler's, then the provider's, then the line's own (the later wins), and the error's
    /// text and type when the line carries one.
    static func metadata(_ base: Logger.Metadata, provider: Logger.MetadataProvider?, event: LogEvent) -> Logger.Metadata {
        var all = base
        if let provided = provider?.get(), !provided.isEmpty { all.merge(provided) { _, new in new } }
        if let given = event.metadata, !given.isEmpty { all.merge(given) { _, new in new } }
        if let error = event.error {
            all["error.message"] = "\(error)"
            all["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        return all
    }

    /// The names and values of a line that is a handler's `base` metadata and the line's own `fields` (which win
    /// over the handler's of the same name), sorted by name, as ``TextLogHandler`` writes them: what
    /// ``metadata(_:provider:event:)`` would give for them, without making and merging dictionaries.
    static func entries(_ base: Logger.Metadata, _ fields: [(key: String, value: String)]) -> [(name: String, value: String)] {
        var entries: [(name: String, value: String)] = []
        entries.reserveCapacity(base.count + fields.count)
        for (key, value) in base where !fields.contains(where: { $0.key == key }) {
            entries.append((JSONLogHandler.name(of: key), value.description))
        }
        for field in fields { entries.append((JSONLogHandler.name(of: field.key), field.value)) }
        entries.sort { $0.name < $1.name }
        return entries
    }

    /// Writes one line (its bytes end with a newline) logged at `level`.
    func line(_ bytes: [UInt8], level: Logger.Level) {
        guard descriptor != nil else {
            ordering.withLock { _ in perLine?(bytes) }
            return
        }
        let now = level >= .warning
        let (writer, wake) = state.withLock { state -> (Bool, Bool) in
            if !state.pending.isEmpty, state.pending.count + bytes.count > Self.maximumPending {
                state.dropped += 1
                return (false, false)
            }
            state.pending.append(contentsOf: bytes)
            // Whoever is writing takes this line too, before it stops.
            if state.writing { return (false, false) }
            if now {
                state.writing = true
                return (true, false)
            }
            return (false, Self.due(&state))
        }
        if wake { due.signal() }
        guard writer else { return }
        // One write, of this line and every one before it; what came meanwhile is the thread's.
        writeBatches(limit: 1)
    }

    /// Marks what is pending as due for the thread; true when the thread is to be woken for it.
    private static func due(_ state: inout State) -> Bool {
        guard !state.flushDue else { return false }
        state.flushDue = true
        return true
    }

    /// Writes what is pending, and waits for a write under way to end: what was logged before the call is out when
    /// it returns, unless standard error did not take it within a second (then the rest is given up: called at exit).
    func flush() {
        guard descriptor != nil else { return }
        let deadline = ContinuousClock.now + .seconds(1)
        while ContinuousClock.now < deadline {
            let writer = state.withLock { state -> Bool? in
                if state.writing { return false }
                if state.pending.isEmpty { return nil }
                state.writing = true
                return true
            }
            guard let writer else { return }
            if writer {
                writeBatches(limit: nil, deadline: deadline)
            } else {
                usleep(1_000)
            }
        }
    }

    /// Writes what is pending unless someone is writing already (who then writes it).
    private func drain() {
        let writer = state.withLock { state -> Bool in
            guard !state.writing, !state.pending.isEmpty else { return false }
            state.writing = true
            return true
        }
        if writer { writeBatches(limit: nil) }
    }

    /// The writer's loop, entered with `writing` set: writes batches until nothing is pending (or after `limit`
    /// batches, leaving the rest to the thread without delay), then lets go. With a `deadline`, each write waits
    /// for standard error to take bytes only until then, and what it did not take is dropped.
    private func writeBatches(limit: Int?, deadline: ContinuousClock.Instant? = nil) {
        guard let descriptor else { return }
        var batch: [UInt8] = []
        var written = 0
        while true {
            let (more, wake) = state.withLock { state -> (Bool, DispatchSemaphore?) in
                if state.pending.isEmpty {
                    state.writing = false
                    return (false, nil)
                }
                if let deadline, ContinuousClock.now >= deadline {
                    state.writing = false
                    return (false, nil)
                }
                if let limit, written >= limit {
                    state.writing = false
                    let first = !state.urgent
                    state.urgent = true
                    if Self.due(&state) { return (false, due) }
                    // The thread, already due, may be waiting for more lines: it is told to write now instead.
                    return (false, first ? hurry : nil)
                }
                swap(&batch, &state.pending)
                if state.dropped > 0 {
                    batch.append(contentsOf: "docketd: \(state.dropped) log lines dropped: standard error did not keep up\n".utf8)
                    state.dropped = 0
                }
                return (true, nil)
            }
            wake?.signal()
            guard more else { return }
            batch.withUnsafeBytes { bytes in
                if let deadline {
                    Self.writeAll(bytes, to: descriptor, until: deadline)
                } else {
                    Self.writeAll(bytes, to: descriptor)
                }
            }
            batch.removeAll(keepingCapacity: true)
            written += 1
        }
    }

    /// Writes in pieces of at most a pipe's atomic size, each once `descriptor` takes bytes, until `deadline`
    /// (the rest is given up): a stalled reader cannot hold the process's exit.
    private static func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32, until deadline: ContinuousClock.Instant) {
        var offset = 0
        while offset < bytes.count {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return }
            var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
            let milliseconds = Int32(clamping: left.components.seconds * 1_000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            let answer = poll(&ready, 1, milliseconds)
            if answer < 0, errno == EINTR { continue }
            guard answer > 0, ready.revents & Int16(POLLOUT) != 0 else { return }
            let piece = min(bytes.count - offset, Int(PIPE_BUF))
            Self.writeAll(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + piece)]), to: descriptor)
            offset += piece
        }
    }

    /// Writes every byte, going on after partial writes and interruptions (a failed write loses the lines: logging
    /// never fails a request).
    private static func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) {
        var offset = 0
        while offset < bytes.count {
            #if canImport(Glibc)
            let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            #else
            let written = Darwin.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            #endif
            if written > 0 {
                offset += written
            } else if written < 0, errno == EINTR {
                continue
            } else {
                return
            }
        }
    }
}

/// A handler that writes a request's line (``ObservedResponder``) from its fields as they are: the line
/// `logger.info("request", metadata:)` would give, without swift-log's metadata dictionaries (a line per request is
/// the one most written).
protocol RequestLineLogging: LogHandler {
    /// Writes the `request` line at `info` with `fields` and the handler's metadata, and returns true; false when it
    /// cannot (the caller then logs the line the usual way).
    func logRequest(_ fields: [(key: String, value: String)], source: String) -> Bool
}

/// `--log-format text` (the default): swift-log's `StreamLogHandler` line,
/// `2026-11-28T06:07:11+0000 info docketd: dialect=servicenow method=GET … request_id=… [DocketServer] request`,
/// made without a time-zone lookup per line (the time's text is kept for its second) and written through
/// ``LogOutput``. The request id is `request_id`, as in JSON lines.
public struct TextLogHandler: LogHandler, RequestLineLogging {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let output: LogOutput

    public init(label: String) { self.init(label: label, output: .standardError) }

    /// Lines go to `write`, one call per line.
    public init(label: String, write: @escaping @Sendable ([UInt8]) -> Void) {
        self.init(label: label, output: LogOutput(write))
    }

    init(label: String, output: LogOutput) {
        self.label = label
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let all = LogOutput.metadata(metadata, provider: metadataProvider, event: event)
        let entries = all.map { (name: JSONLogHandler.name(of: $0.key), value: $0.value.description) }.sorted { $0.name < $1.name }
        write(level: event.level, entries: entries, source: event.source, message: event.message.description)
    }

    func logRequest(_ fields: [(key: String, value: String)], source: String) -> Bool {
        // A provider's metadata is the provider's to give: such a line goes the usual way.
        guard metadataProvider == nil else { return false }
        write(level: .info, entries: LogOutput.entries(metadata, fields), source: source, message: "request")
        return true
    }

    private func write(level: Logger.Level, entries: [(name: String, value: String)], source: String, message: String) {
        var line: [UInt8] = []
        line.reserveCapacity(256)
        line.append(contentsOf: Self.clock.text(now: time(nil)).utf8)
        line.append(UInt8(ascii: " "))
        line.append(contentsOf: level.rawValue.utf8)
        if !label.isEmpty {
            line.append(UInt8(ascii: " "))
            line.append(contentsOf: label.utf8)
        }
        line.append(UInt8(ascii: ":"))
        for (name, value) in entries {
            line.append(UInt8(ascii: " "))
            line.append(contentsOf: name.utf8)
            line.append(UInt8(ascii: "="))
            line.append(contentsOf: value.utf8)
        }
        line.append(contentsOf: " [".utf8)
        line.append(contentsOf: source.utf8)
        line.append(contentsOf: "] ".utf8)
        line.append(contentsOf: message.utf8)
        line.append(UInt8(ascii: "\n"))
        output.line(line, level: level)
    }

    /// The local time's text (`%Y-%m-%dT%H:%M:%S%z`), made once a second.
    private static let clock = Clock()

    final class Clock: Sendable {
        private let kept = Mutex<(second: time_t, text: String)>((-1, ""))

        func text(now: time_t) -> String {
            if let text = kept.withLock({ $0.second == now ? $0.text : nil }) { return text }
            var seconds = now
            var parts = tm()
            var buffer = [Int8](repeating: 0, count: 64)
            let text: String
            if localtime_r(&seconds, &parts) != nil, strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &parts) > 0 {
                text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            } else {
                text = "<unknown>"
            }
            kept.withLock { $0 = (now, text) }
            return text
        }
    }
}
