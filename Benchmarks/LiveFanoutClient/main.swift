// The reading side of Benchmarks/live-fanout.py: SUBSCRIBERS graphql-transport-ws sockets to a running docketd,
// each subscribed to incidents matching a query (or, with LIVE_FANOUT_TRANSPORT=sse, as many Server-Sent Events
// streams of /api/docket/events following the same incidents); then WRITES incidents created one after another
// (Basic admin:admin, through the Table API), each timed from sending its POST to its change arriving on every
// socket. Prints "p50 <ms> p99 <ms>".
//
// On a 2-core machine the reader shares the CPUs with the server it measures, so it is as cheap as it can be:
// - the sockets are plain non-blocking sockets on one epoll loop per reader thread;
// - the upgrade and the client's two messages (or the stream's request) are written by hand, and each read is only
//   searched for the write's marker (the server's frames are unmasked, and SSE's JSON does not escape the marker,
//   so its bytes appear as they are);
// - the POSTs go over one kept-alive blocking socket.
// A message costs one read here. Through a WebSocket client library with a task per socket it cost 60 µs, and
// through NIO channels 16 µs, which was most of what was measured.
//
// Each delivery is timed by the kernel's receive timestamp (SO_TIMESTAMPNS): when the message reached the
// subscriber's socket. So the reader need not race the server for the two CPUs: with PAUSE_MS it reads in
// batches, a pass every PAUSE_MS, which costs far fewer wake-ups, and the server keeps more of the CPUs, as it
// would with its clients on other machines.
//
//     live-fanout-client PORT SUBSCRIBERS WRITES [READER_THREADS] [PAUSE_MS]
//
// The subscribers are all john.doe, so that those alike share one live group, unless LIVE_FANOUT_USERS=N: then
// subscriber i is user i % N, so that N groups (N = SUBSCRIBERS: none shared) each judge and render every change.
// With LIVE_FANOUT_USER_PREFIX=P the N users exist already (`docketd users seed N --prefix P`, password
// "password", as live-fanout.py seeds them before docketd starts); without it they are created first through the
// Table API as admin, a bcrypt hash each, which takes minutes for a thousand.
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

let arguments = CommandLine.arguments
guard arguments.count >= 4, let port = Int(arguments[1]), let subscribers = Int(arguments[2]), subscribers > 0,
    let writes = Int(arguments[3]), writes > 0
else {
    FileHandle.standardError.write(Data((
        "usage: [LIVE_FANOUT_USERS=N] [LIVE_FANOUT_SPANS=1] [LIVE_FANOUT_TRANSPORT=sse] live-fanout-client PORT SUBSCRIBERS WRITES [READER_THREADS] [PAUSE_MS]\n"
    ).utf8))
    exit(2)
}
let readerThreads = arguments.count > 4 ? max(1, Int(arguments[4]) ?? 1) : 1
/// Milliseconds the reader waits between passes over its sockets (0: it reads as soon as a socket is readable).
let readerPause = arguments.count > 5 ? max(0, Int(arguments[5]) ?? 0) : 0

/// The wall clock in nanoseconds: the clock of the kernel's receive timestamps.
func wallClock() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_REALTIME, &time)
    return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
}

struct Failure: Error, CustomStringConvertible {
    let description: String
}

/// The write in flight: its marker and when it was sent; who still waits for it; what was measured.
final class Round: Sendable {
    struct State {
        var number = 0
        var marker: [UInt8] = []
        var sent: Int64 = 0  // wallClock()
        var remaining = 0
        var latencies: [Double] = []
        /// Per measured write: its first and last delivery (ms).
        var spans: [(first: Double, last: Double)] = []
        var measuring = false
    }

    let state = Mutex(State())

    /// Records arrivals of round `number` (ignored when that round is over).
    func arrived(_ times: [Int64], in number: Int) {
        state.withLock { state in
            guard state.number == number else { return }
            state.remaining -= times.count
            guard state.measuring else { return }
            for time in times {
                let ms = Double(time - state.sent) / 1e6
                state.latencies.append(ms)
                let write = state.number - 2  // the first round, numbered 1, warms up
                while state.spans.count <= write { state.spans.append((ms, ms)) }
                state.spans[write] = (min(state.spans[write].first, ms), max(state.spans[write].last, ms))
            }
        }
    }
}

/// Whether `needle` occurs in `haystack` (memchr for its first byte, then memcmp).
@Sendable func contains(_ haystack: UnsafeRawBufferPointer, _ needle: [UInt8]) -> Bool {
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

func connectSocket(_ port: Int) throws -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard descriptor >= 0, connected == 0 else { throw Failure(description: "cannot connect: errno \(errno)") }
    var one: Int32 = 1
    setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    return descriptor
}

func send(_ descriptor: Int32, _ bytes: [UInt8]) throws {
    guard bytes.withUnsafeBytes({ write(descriptor, $0.baseAddress, $0.count) }) == bytes.count else {
        throw Failure(description: "short write")
    }
}

/// Reads (blocking) until `end` has arrived; what was read.
func read(_ descriptor: Int32, until end: [UInt8]) throws -> [UInt8] {
    var received: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while !received.withUnsafeBytes({ contains($0, end) }) {
        let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { throw Failure(description: "connection closed while waiting for \(String(decoding: end, as: UTF8.self))") }
        received += chunk[0..<count]
    }
    return received
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

/// The demo's itil role, which may read every incident.
let itilRole = "282bf1fac6112285017366cb5f867469"
/// How many distinct users the subscribers are (0: all john.doe).
let users = max(0, Int(ProcessInfo.processInfo.environment["LIVE_FANOUT_USERS"] ?? "") ?? 0)
let document = #"subscription { incident(queryConditions: \"short_descriptionSTARTSWITHlive-bench\") { sequence change sys_id record { number { value } short_description { value } } } }"#
let upgrade = Array(
    ("GET /api/now/graphql HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        + "Sec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n").utf8
)
/// Server-Sent Events instead of WebSockets.
let sse = ProcessInfo.processInfo.environment["LIVE_FANOUT_TRANSPORT"] == "sse"
/// The client's first two messages as `user` (with the demo password), or the stream's request.
func opening(as user: String) -> [UInt8] {
    let auth = "Basic " + Data("\(user):password".utf8).base64EncodedString()
    if sse {
        return Array((
            "GET /api/docket/events?table=incident&query=short_descriptionSTARTSWITHlive-bench HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
                + "Accept: text/event-stream\r\nAuthorization: \(auth)\r\n\r\n"
        ).utf8)
    }
    return frame(#"{"type":"connection_init","payload":{"Authorization":"\#(auth)"}}"#)
        + frame(#"{"type":"subscribe","id":"1","payload":{"query":"\#(document)"}}"#)
}

/// Opens one subscriber: upgrade, init, subscribe (or the stream's request, until its `ready`); then non-blocking,
/// for the epoll loop.
func subscriber(_ port: Int, upgrade: [UInt8], opening: [UInt8]) throws -> Int32 {
    let descriptor = try connectSocket(port)
    if sse {
        try send(descriptor, opening)
        _ = try read(descriptor, until: Array("event: ready".utf8))
    } else {
        try send(descriptor, upgrade)
        _ = try read(descriptor, until: Array("\r\n\r\n".utf8))
        try send(descriptor, opening)
        _ = try read(descriptor, until: Array("connection_ack".utf8))
    }
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
    // The kernel stamps each arrival: a delivery is timed when it reached the socket, not when this reader got
    // round to it, so the reader may take its time.
    var one: Int32 = 1
    setsockopt(descriptor, SOL_SOCKET, Received.timestampOption, &one, socklen_t(MemoryLayout<Int32>.size))
    return descriptor
}

/// epoll, which Swift's Glibc module does not export: looked up in the C library and called with C's convention.
/// An `epoll_event` is 12 packed bytes on x86-64 (events, then 64 bits of data, here the descriptor).
enum Epoll {
    typealias Create = @convention(c) (Int32) -> Int32
    typealias Control = @convention(c) (Int32, Int32, Int32, UnsafeMutableRawPointer?) -> Int32
    typealias Wait = @convention(c) (Int32, UnsafeMutableRawPointer?, Int32, Int32) -> Int32
    static let create = unsafeBitCast(dlsym(dlopen(nil, RTLD_NOW), "epoll_create1"), to: Create.self)
    static let control = unsafeBitCast(dlsym(dlopen(nil, RTLD_NOW), "epoll_ctl"), to: Control.self)
    static let wait = unsafeBitCast(dlsym(dlopen(nil, RTLD_NOW), "epoll_wait"), to: Wait.self)
    static let eventSize = 12
    static let readable: UInt32 = 1  // EPOLLIN
    static let add: Int32 = 1  // EPOLL_CTL_ADD
}

/// Reads with the kernel's receive timestamp (SO_TIMESTAMPNS: the time the last byte read reached the socket).
enum Received {
    static let timestampOption: Int32 = 35  // SO_TIMESTAMPNS, also its control message's type

    /// Bytes read into `buffer` and their arrival (wall clock, ns); nil at end or when nothing was there.
    static func read(_ descriptor: Int32, into buffer: inout [UInt8], control: inout [UInt8]) -> (Int, Int64)? {
        buffer.withUnsafeMutableBytes { bytes in
            control.withUnsafeMutableBytes { controlBytes in
                var vector = iovec(iov_base: bytes.baseAddress, iov_len: bytes.count)
                return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                    var message = msghdr()
                    message.msg_iov = vectorPointer
                    message.msg_iovlen = 1
                    message.msg_control = controlBytes.baseAddress
                    message.msg_controllen = controlBytes.count
                    let count = recvmsg(descriptor, &message, 0)
                    guard count > 0 else { return nil }
                    // cmsghdr: length (8), level (4), type (4), then the timespec.
                    var offset = 0
                    var arrival = wallClock()
                    while offset + 16 <= message.msg_controllen {
                        let length = controlBytes.loadUnaligned(fromByteOffset: offset, as: Int.self)
                        let level = controlBytes.loadUnaligned(fromByteOffset: offset + 8, as: Int32.self)
                        let type = controlBytes.loadUnaligned(fromByteOffset: offset + 12, as: Int32.self)
                        if level == SOL_SOCKET, type == timestampOption, length >= 32 {
                            let seconds = controlBytes.loadUnaligned(fromByteOffset: offset + 16, as: Int.self)
                            let nanoseconds = controlBytes.loadUnaligned(fromByteOffset: offset + 24, as: Int.self)
                            arrival = Int64(seconds) * 1_000_000_000 + Int64(nanoseconds)
                        }
                        guard length > 0 else { break }
                        offset += (length + 7) & ~7
                    }
                    return (count, arrival)
                }
            }
        }
    }
}

/// One reader thread: an epoll loop over its sockets, each read searched for the marker of the write in flight.
@Sendable func readLoop(_ descriptors: [Int32], round: Round) {
    let poll = Epoll.create(0)
    var record = [UInt8](repeating: 0, count: Epoll.eventSize)
    for descriptor in descriptors {
        record.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: Epoll.readable, toByteOffset: 0, as: UInt32.self)
            raw.storeBytes(of: UInt64(UInt32(bitPattern: descriptor)), toByteOffset: 4, as: UInt64.self)
            _ = Epoll.control(poll, Epoll.add, descriptor, raw.baseAddress)
        }
    }
    let capacity = 256
    var events = [UInt8](repeating: 0, count: capacity * Epoll.eventSize)
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    var seen = [Int32: Int]()  // descriptor → the last round it saw
    var tails = [Int32: [UInt8]]()
    var control = [UInt8](repeating: 0, count: 256)
    while true {
        if readerPause > 0 { usleep(UInt32(readerPause * 1000)) }
        let ready = events.withUnsafeMutableBytes { Epoll.wait(poll, $0.baseAddress, Int32(capacity), 100) }
        guard ready > 0 else { continue }
        let (number, marker) = round.state.withLock { ($0.number, $0.marker) }
        var arrivals: [Int64] = []
        for index in 0..<Int(ready) {
            let descriptor = events.withUnsafeBytes {
                Int32(truncatingIfNeeded: $0.loadUnaligned(fromByteOffset: index * Epoll.eventSize + 4, as: UInt64.self))
            }
            guard let (count, now) = Received.read(descriptor, into: &buffer, control: &control) else { continue }
            guard !marker.isEmpty, seen[descriptor] != number else { continue }
            var found = buffer.withUnsafeBytes { contains(UnsafeRawBufferPointer(rebasing: $0[0..<count]), marker) }
            if !found, let tail = tails[descriptor] {
                // Across the boundary of two reads.
                let seam = tail + buffer[0..<min(count, marker.count)]
                found = seam.withUnsafeBytes { contains($0, marker) }
            }
            if found {
                seen[descriptor] = number
                arrivals.append(now)
            } else {
                tails[descriptor] = Array(buffer[max(0, count - marker.count)..<count])
            }
        }
        if !arrivals.isEmpty { round.arrived(arrivals, in: number) }
    }
}

/// The writer's one kept-alive connection, spoken to in plain HTTP/1.1 over a blocking socket, so that what is
/// timed is docketd's work rather than an HTTP client library's.
final class Writer {
    let descriptor: Int32
    let authorization = "Basic " + Data("admin:admin".utf8).base64EncodedString()

    init(port: Int) throws { descriptor = try connectSocket(port) }
    deinit { close(descriptor) }

    /// Creates an incident and waits for the whole answer.
    func post(_ text: String) throws {
        _ = try create("incident", #"{"short_description":"\#(text)"}"#)
    }

    /// Creates a record, waits for the whole answer and returns its body.
    func create(_ table: String, _ json: String) throws -> String {
        let body = Array(json.utf8)
        let head = "POST /api/now/table/\(table) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: \(authorization)\r\n"
            + "Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
        try send(descriptor, Array(head.utf8) + body)
        var received = try read(descriptor, until: Array("\r\n\r\n".utf8))
        while true {
            let text = String(decoding: received, as: UTF8.self)
            guard let end = text.range(of: "\r\n\r\n") else { throw Failure(description: "no response head") }
            let length = text[..<end.lowerBound].split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            if text.utf8.distance(from: end.upperBound, to: text.utf8.endIndex) >= length {
                guard text.hasPrefix("HTTP/1.1 201") else { throw Failure(description: "creating a \(table) record: \(text.prefix(300))") }
                return String(text[end.upperBound...])
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { throw Failure(description: "connection closed during a response") }
            received += chunk[0..<count]
        }
    }
}

func waitUntil(_ deadline: Duration, _ done: () -> Bool) throws {
    let end = ContinuousClock.now + deadline
    while !done() {
        guard ContinuousClock.now < end else { throw Failure(description: "timed out") }
        usleep(200)
    }
}

let round = Round()
do {
    var writer = try Writer(port: port)
    var names = ["john.doe"]
    if users > 0, let prefix = ProcessInfo.processInfo.environment["LIVE_FANOUT_USER_PREFIX"] {
        // Seeded: PREFIX followed by 1…N, zero-padded to N's width.
        let width = String(users).count
        names = (1...users).map { index in
            let number = String(index)
            return prefix + String(repeating: "0", count: width - number.count) + number
        }
    } else if users > 0 {
        let run = UUID().uuidString.prefix(8).lowercased()
        names = try (0..<users).map { index in
            let name = "fanout.\(run).\(index)"
            let answer = try writer.create("sys_user", #"{"user_name":"\#(name)","user_password":"password","active":"true"}"#)
            guard let range = answer.range(of: #""sys_id":""#), let close = answer[range.upperBound...].firstIndex(of: "\"") else {
                throw Failure(description: "no sys_id for the new user \(name)")
            }
            let id = answer[range.upperBound..<close]
            _ = try writer.create("sys_user_has_role", #"{"user":"\#(id)","role":"\#(itilRole)"}"#)
            return name
        }
    }
    let openings = names.map(opening(as:))
    var descriptors: [Int32] = []
    for index in 0..<subscribers {
        descriptors.append(try subscriber(port, upgrade: upgrade, opening: openings[index % openings.count]))
    }
    // Opening many users' sockets (a password check each) can outlast the idle limit of the users' connection.
    if users > 0 { writer = try Writer(port: port) }
    // The subscribe message follows the acknowledgement on each socket; let the last ones start.
    sleep(1)
    for thread in 0..<readerThreads {
        let mine = descriptors.enumerated().filter { $0.offset % readerThreads == thread }.map(\.element)
        Thread.detachNewThread { readLoop(mine, round: round) }
    }
    for index in -1..<writes {
        let marker = "live-bench \(index) \(UUID().uuidString)"
        round.state.withLock { state in
            state.number += 1
            state.marker = Array(marker.utf8)
            state.remaining = subscribers
            state.measuring = index >= 0  // the first write warms up
            state.sent = wallClock()
        }
        try writer.post(marker)
        do {
            try waitUntil(.seconds(30)) { round.state.withLock { $0.remaining } <= 0 }
        } catch {
            throw Failure(description: "\(round.state.withLock { $0.remaining }) subscribers missed write \(index)")
        }
    }
    let latencies = round.state.withLock { $0.latencies }.sorted()
    func percentile(_ fraction: Double) -> Double { latencies[min(latencies.count - 1, Int(fraction * Double(latencies.count)))] }
    print(String(format: "p50 %.1f p99 %.1f", percentile(0.5), percentile(0.99)))
    if ProcessInfo.processInfo.environment["LIVE_FANOUT_SPANS"] != nil {
        // Each write's first and last delivery, to tell a slow tail from a few slow writes.
        let spans = round.state.withLock { $0.spans }
        FileHandle.standardError.write(Data(spans.map { String(format: "%.1f-%.1f", $0.first, $0.last) }.joined(separator: " ").utf8 + [10]))
    }
    for descriptor in descriptors { close(descriptor) }
    exit(0)
} catch {
    FileHandle.standardError.write(Data("live-fanout-client: \(error)\n".utf8))
    exit(1)
}
