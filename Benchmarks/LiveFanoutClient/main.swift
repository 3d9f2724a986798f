// The reading side of Benchmarks/live-fanout.py for WebSockets: SUBSCRIBERS graphql-transport-ws sockets to a
// running docketd, each subscribed to incidents matching a query; then WRITES incidents created one after another
// (Basic admin:admin, through the Table API), each timed from sending its POST to its change arriving on every
// socket. Prints "p50 <ms> p99 <ms>".
//
// The reader is as cheap as it can be, because on a 2-core machine it shares the CPUs with the server it measures:
// plain NIO channels on one event-loop thread, the upgrade and the client's two messages written by hand, and each
// read only searched for the write's marker (the server's frames are unmasked, so the marker's bytes appear as they
// are). A message costs about a microsecond here; through a WebSocket client library with a task per socket it
// cost tens, which was most of what was measured.
//
//     live-fanout-client PORT SUBSCRIBERS WRITES [READER_THREADS]
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOPosix
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let arguments = CommandLine.arguments
guard arguments.count >= 4, let port = Int(arguments[1]), let subscribers = Int(arguments[2]), subscribers > 0,
    let writes = Int(arguments[3]), writes > 0
else {
    FileHandle.standardError.write(Data("usage: live-fanout-client PORT SUBSCRIBERS WRITES [READER_THREADS]\n".utf8))
    exit(2)
}
let readerThreads = arguments.count > 4 ? max(1, Int(arguments[4]) ?? 1) : 1

/// What the sockets report to: the marker of the write in flight, when it was sent, who still waits for it.
final class Round: Sendable {
    struct State {
        var marker: [UInt8] = []
        var sent = ContinuousClock.now
        var remaining = 0
        var latencies: [Double] = []
        var ready = 0
        var measuring = false
    }

    let state = Mutex(State())

    var marker: [UInt8] { state.withLock { $0.marker } }

    func acknowledged() { state.withLock { $0.ready += 1 } }

    func arrived(at now: ContinuousClock.Instant) {
        state.withLock { state in
            guard state.remaining > 0 else { return }
            state.remaining -= 1
            if state.measuring {
                let elapsed = now - state.sent
                state.latencies.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
            }
        }
    }
}

/// A client text frame (clients must mask).
func frame(_ text: String) -> [UInt8] {
    let payload = Array(text.utf8)
    var bytes: [UInt8] = [0x81]
    if payload.count < 126 {
        bytes.append(0x80 | UInt8(payload.count))
    } else {
        bytes.append(0x80 | 126)
        bytes += [UInt8(payload.count >> 8), UInt8(payload.count & 0xff)]
    }
    let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
    bytes += mask
    for (index, byte) in payload.enumerated() { bytes.append(byte ^ mask[index % 4]) }
    return bytes
}

let auth = "Basic " + Data("john.doe:password".utf8).base64EncodedString()
let document = #"subscription { incident(queryConditions: \"short_descriptionSTARTSWITHlive-bench\") { sequence change sys_id record { number { value } short_description { value } } } }"#
let upgrade = Array(
    ("GET /api/now/graphql HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        + "Sec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n").utf8
)
let opening =
    frame(#"{"type":"connection_init","payload":{"Authorization":"\#(auth)"}}"#)
    + frame(#"{"type":"subscribe","id":"1","payload":{"query":"\#(document)"}}"#)
let acknowledgement = Array("connection_ack".utf8)

/// Whether `needle` occurs in `haystack` (memchr for its first byte, then memcmp: the reader's one real cost
/// per message).
func contains(_ haystack: UnsafeRawBufferPointer, _ needle: [UInt8]) -> Bool {
    guard let first = needle.first, haystack.count >= needle.count, let base = haystack.baseAddress else { return false }
    return needle.withUnsafeBytes { pattern in
        var offset = 0
        let last = haystack.count - needle.count
        while offset <= last {
            guard let hit = memchr(base + offset, Int32(first), last - offset + 1) else { return false }
            let at = base.distance(to: UnsafeRawPointer(hit))
            if memcmp(base + at, pattern.baseAddress!, needle.count) == 0 { return true }
            offset = at + 1
        }
        return false
    }
}

/// One subscriber: upgrades, subscribes, then looks for the marker of the write in flight in what arrives.
final class Subscriber: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let round: Round
    var upgraded = false
    var acknowledged = false
    var seenMarker: [UInt8] = []
    /// The last bytes of the previous read, in case a marker straddles two reads.
    var tail: [UInt8] = []

    init(round: Round) { self.round = round }

    func channelActive(context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: upgrade)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let now = ContinuousClock.now
        let buffer = unwrapInboundIn(data)
        if !upgraded || !acknowledged {
            let bytes = tail + Array(buffer.readableBytesView)
            tail = Array(bytes.suffix(256))
            if !upgraded {
                guard bytes.withUnsafeBytes({ contains($0, Array("\r\n\r\n".utf8)) }) else { return }
                upgraded = true
                context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: opening)), promise: nil)
            }
            if bytes.withUnsafeBytes({ contains($0, acknowledgement) }) {
                acknowledged = true
                round.acknowledged()
            }
            return
        }
        let marker = round.marker
        guard !marker.isEmpty, marker != seenMarker else { return }
        var found = buffer.withUnsafeReadableBytes { contains($0, marker) }
        if !found, !tail.isEmpty {
            // Across the boundary: the previous read's tail and the start of this one.
            let seam = tail + Array(buffer.readableBytesView.prefix(marker.count))
            found = seam.withUnsafeBytes { contains($0, marker) }
        }
        if found {
            seenMarker = marker
            round.arrived(at: now)
        }
        tail = Array(buffer.readableBytesView.suffix(marker.count))
    }
}

let round = Round()
let group = MultiThreadedEventLoopGroup(numberOfThreads: readerThreads)
let bootstrap = ClientBootstrap(group: group).channelInitializer { channel in
    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Subscriber(round: round)) }
}

@MainActor func waitUntil(_ deadline: Duration, _ done: () -> Bool) async throws {
    let end = ContinuousClock.now + deadline
    while !done() {
        guard ContinuousClock.now < end else { throw CancellationError() }
        try await Task.sleep(for: .microseconds(200))
    }
}

/// The writer's one kept-alive connection, spoken to in plain HTTP/1.1 over a blocking socket, so that what is
/// timed is docketd's work rather than an HTTP client library's.
final class Writer {
    let descriptor: Int32
    let authorization = "Basic " + Data("admin:admin".utf8).base64EncodedString()

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard descriptor >= 0, connected == 0 else { throw CancellationError() }
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Creates an incident and waits for the whole answer.
    func post(_ text: String) throws {
        let body = Array(#"{"short_description":"\#(text)"}"#.utf8)
        let head = "POST /api/now/table/incident HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: \(authorization)\r\n"
            + "Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
        let request = Array(head.utf8) + body
        guard request.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) == request.count else { throw CancellationError() }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { throw CancellationError() }
            received += chunk[0..<count]
            let text = String(decoding: received, as: UTF8.self)
            guard let end = text.range(of: "\r\n\r\n") else { continue }
            let length = text[..<end.lowerBound].split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            if text.utf8.distance(from: end.upperBound, to: text.utf8.endIndex) >= length { return }
        }
    }
}

do {
    let writer = try Writer(port: port)
    var channels: [any Channel] = []
    for _ in 0..<subscribers { channels.append(try await bootstrap.connect(host: "127.0.0.1", port: port).get()) }
    try await waitUntil(.seconds(120)) { round.state.withLock { $0.ready } >= subscribers }
    // The subscribe message follows the acknowledgement on each socket; let the last ones start.
    try await Task.sleep(for: .seconds(1))
    for index in -1..<writes {
        let marker = "live-bench \(index) \(UUID().uuidString)"
        round.state.withLock { state in
            state.marker = Array(marker.utf8)
            state.remaining = subscribers
            state.measuring = index >= 0  // the first write warms up
            state.sent = .now
        }
        let posted = ContinuousClock.now
        try writer.post(marker)
        if ProcessInfo.processInfo.environment["FANOUT_DEBUG"] != nil {
            let first = round.state.withLock { $0.latencies.suffix(subscribers).min() ?? -1 }
            FileHandle.standardError.write(Data("post \(ContinuousClock.now - posted) first \(first) ms\n".utf8))
        }
        try await waitUntil(.seconds(30)) { round.state.withLock { $0.remaining } == 0 }
    }
    let latencies = round.state.withLock { $0.latencies }.sorted()
    func percentile(_ fraction: Double) -> Double { latencies[min(latencies.count - 1, Int(fraction * Double(latencies.count)))] }
    print(String(format: "p50 %.1f p99 %.1f", percentile(0.5), percentile(0.99)))
    for channel in channels { channel.close(promise: nil) }
    exit(0)
} catch {
    let (ready, remaining) = round.state.withLock { ($0.ready, $0.remaining) }
    FileHandle.standardError.write(Data("live-fanout-client: failed (\(ready) sockets ready, \(remaining) deliveries missing): \(error)\n".utf8))
    exit(1)
}
