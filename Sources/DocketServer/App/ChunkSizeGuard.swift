import NIOCore
import NIOHTTP1

/// Refuses a chunked request body at once when a chunk announces more bytes than docketd would ever take.
///
/// The HTTP/1.1 parser takes any chunk size that fits in 64 bits (`ffffffffffffffff`) and then waits for those
/// bytes, so a request announcing one would hold its connection until the idle timeout. This handler, in front of
/// the parser, follows the framing of each request (its head, then a body of `Content-Length` bytes or chunks) and
/// reads each chunk's size line: a size over ``limit`` fails the request at once, as a malformed one (400) when it
/// is beyond any real body (2^53 bytes and more) and as a too large body (413) otherwise. It only ever refuses what
/// it has read with certainty; anything it does not follow (an upgrade, `CONNECT`, a head or line it cannot read)
/// makes it stand aside for the rest of the connection and leave the parser to judge.
final class ChunkSizeGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The largest body docketd takes (its largest body limit).
    let limit: UInt64

    private enum State {
        /// Reading a request head; `seen` bytes of it so far, and the last four (to find its end).
        case head(seen: Int, tail: UInt32, lines: [UInt8])
        /// Skipping `remaining` bytes of a body with a known length, then `next`.
        case body(remaining: UInt64)
        /// Reading a chunk size line.
        case chunkSize(line: [UInt8])
        /// Skipping a chunk's data, then its CRLF.
        case chunkData(remaining: UInt64)
        /// Reading trailer lines after the last chunk, until an empty one.
        case trailers(line: [UInt8])
        /// Standing aside for the rest of the connection.
        case off
        /// The request was refused.
        case refused
    }

    private var state = State.head(seen: 0, tail: 0, lines: [])
    private static let maxHead = 96 * 1024
    private static let maxLine = 1024
    private static let absurd: UInt64 = 1 << 53

    init(limit: Int) {
        self.limit = UInt64(max(limit, 0))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .refused = state { return }
        let buffer = unwrapInboundIn(data)
        if case .off = state {
            context.fireChannelRead(data)
            return
        }
        var refusal: (any Error)? = nil
        buffer.withUnsafeReadableBytes { bytes in
            var index = 0
            while index < bytes.count, refusal == nil {
                if case .off = state { break }
                index = step(bytes, from: index, refusal: &refusal)
            }
        }
        context.fireChannelRead(data)
        if let refusal {
            state = .refused
            context.fireErrorCaught(refusal)
        }
    }

    /// Consumes bytes from `index` in the current state; returns where it stopped.
    private func step(_ bytes: UnsafeRawBufferPointer, from index: Int, refusal: inout (any Error)?) -> Int {
        switch state {
        case .head(var seen, var tail, var lines):
            var index = index
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                seen += 1
                tail = tail << 8 | UInt32(byte)
                lines.append(byte)
                if seen > Self.maxHead {
                    state = .off
                    return index
                }
                if tail == 0x0D0A_0D0A {
                    state = afterHead(lines)
                    return index
                }
            }
            state = .head(seen: seen, tail: tail, lines: lines)
            return index
        case .body(let remaining):
            let available = UInt64(bytes.count - index)
            if available < remaining {
                state = .body(remaining: remaining - available)
                return bytes.count
            }
            state = .head(seen: 0, tail: 0, lines: [])
            return index + Int(remaining)
        case .chunkData(let remaining):
            let available = UInt64(bytes.count - index)
            if available < remaining {
                state = .chunkData(remaining: remaining - available)
                return bytes.count
            }
            // The data's CRLF is read as an empty size line.
            state = .chunkSize(line: [])
            return index + Int(remaining)
        case .chunkSize(var line):
            var index = index
            while true {
                let read = Self.readLine(bytes, from: index, into: &line)
                index = read.index
                guard !read.tooLong else { state = .off; return index }
                guard read.complete else { state = .chunkSize(line: line); return index }
                // The CRLF that ends a chunk's data comes first: an empty line.
                if line.isEmpty { continue }
                switch Self.chunkSize(line) {
                case .none: state = .off
                case .some(.none): refusal = HTTPParserError.invalidChunkSize
                case .some(.some(let size)):
                    if size == 0 {
                        state = .trailers(line: [])
                    } else if size > limit {
                        refusal = size >= Self.absurd ? HTTPParserError.invalidChunkSize : NIOTooManyBytesError(maxBytes: Int(limit))
                    } else {
                        state = .chunkData(remaining: size)
                    }
                }
                return index
            }
        case .trailers(var line):
            var index = index
            while true {
                let read = Self.readLine(bytes, from: index, into: &line)
                index = read.index
                guard !read.tooLong else { state = .off; return index }
                guard read.complete else { state = .trailers(line: line); return index }
                if line.isEmpty {
                    state = .head(seen: 0, tail: 0, lines: [])
                    return index
                }
                line = []
            }
        case .off, .refused:
            return bytes.count
        }
    }

    /// Reads bytes into `line` up to the next LF: where it stopped, whether the line is complete (then without its
    /// CR), and whether it grew past ``maxLine``.
    private static func readLine(
        _ bytes: UnsafeRawBufferPointer, from start: Int, into line: inout [UInt8]
    ) -> (index: Int, complete: Bool, tooLong: Bool) {
        var index = start
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == 0x0A {
                if line.last == 0x0D { line.removeLast() }
                return (index, true, false)
            }
            line.append(byte)
            if line.count > maxLine { return (index, false, true) }
        }
        return (index, false, false)
    }

    /// What follows a request head: its body's framing, or standing aside. Read as bytes: only the names of the
    /// header fields are looked at, and the values of the three that matter (a long `Authorization` or `Cookie`
    /// value costs nothing more than its bytes' scan).
    private func afterHead(_ head: [UInt8]) -> State {
        var lines: [ArraySlice<UInt8>] = []
        var start = 0
        var index = 0
        while index + 1 < head.count {
            if head[index] == 13, head[index + 1] == 10 {
                if index > start { lines.append(head[start..<index]) }
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        if start < head.count { lines.append(head[start..<head.count]) }
        guard let requestLine = lines.first else { return .off }
        if requestLine.starts(with: Self.connect) { return .off }
        var chunked = false
        var length: UInt64? = nil
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return .off }
            let name = line[line.startIndex..<colon]
            func value() -> [UInt8] {
                var bytes = line[line.index(after: colon)...].map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 32 : $0 }[...]
                while let first = bytes.first, first == 0x20 || first == 0x09 { bytes = bytes.dropFirst() }
                while let last = bytes.last, last == 0x20 || last == 0x09 { bytes = bytes.dropLast() }
                return Array(bytes)
            }
            if Self.named(name, Self.upgrade) { return .off }
            if Self.named(name, Self.transferEncoding) {
                let last = value().split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).last ?? []
                chunked = Array(last.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed()) == Self.chunkedToken
                if !chunked { return .off }
            } else if Self.named(name, Self.contentLength) {
                guard let number = UInt64(String(decoding: value(), as: UTF8.self)), length == nil || length == number else { return .off }
                length = number
            }
        }
        if chunked { return length == nil ? .chunkSize(line: []) : .off }
        if let length, length > 0 { return .body(remaining: length) }
        return .head(seen: 0, tail: 0, lines: [])
    }

    private static let connect = Array("CONNECT ".utf8)
    private static let upgrade = Array("upgrade".utf8)
    private static let transferEncoding = Array("transfer-encoding".utf8)
    private static let contentLength = Array("content-length".utf8)
    private static let chunkedToken = Array("chunked".utf8)

    /// Whether a field name is `lowercased` (ASCII, any case).
    private static func named(_ name: ArraySlice<UInt8>, _ lowercased: [UInt8]) -> Bool {
        guard name.count == lowercased.count else { return false }
        return zip(name, lowercased).allSatisfy { ($0 >= 0x41 && $0 <= 0x5A ? $0 + 32 : $0) == $1 }
    }

    /// A chunk size line's size (hex digits before any extension): nil when it is not one; `.some(nil)` when the
    /// size does not fit in 64 bits.
    private static func chunkSize(_ line: [UInt8]) -> UInt64?? {
        var size: UInt64 = 0
        var digits = 0
        for byte in line {
            let value: UInt64
            switch byte {
            case 0x30...0x39: value = UInt64(byte - 0x30)
            case 0x41...0x46: value = UInt64(byte - 0x37)
            case 0x61...0x66: value = UInt64(byte - 0x57)
            case 0x3B, 0x20, 0x09: return digits > 0 ? .some(size) : nil
            default: return nil
            }
            digits += 1
            guard size >> 60 == 0 else { return .some(nil) }
            size = size << 4 | value
        }
        return digits > 0 ? .some(size) : nil
    }
}
