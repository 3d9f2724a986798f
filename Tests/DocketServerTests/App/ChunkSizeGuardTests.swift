import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import DocketServer

/// ``ChunkSizeGuard`` follows each request's framing in front of the HTTP parser and refuses a chunk announcing more
/// than docketd takes, however the bytes are split; everything else passes through untouched.
@Suite("Chunk size guard")
struct ChunkSizeGuardTests {
    static let limit = 1_000

    /// Feeds `text` in pieces of `piece` bytes; the bytes passed on, and the error raised (if any).
    static func feed(_ text: String, piece: Int) throws -> (passed: String, error: (any Error)?) {
        let channel = EmbeddedChannel(handler: ChunkSizeGuard(limit: limit))
        let bytes = Array(text.utf8)
        var error: (any Error)? = nil
        var start = 0
        while start < bytes.count, error == nil {
            let end = min(start + piece, bytes.count)
            do {
                try channel.writeInbound(ByteBuffer(bytes: bytes[start..<end]))
                try channel.throwIfErrorCaught()
            } catch let caught {
                error = caught
            }
            start = end
        }
        var passed = ""
        while let buffer = try channel.readInbound(as: ByteBuffer.self) { passed += String(buffer: buffer) }
        _ = try? channel.finish()
        return (passed, error)
    }

    static func chunked(_ body: String, extra: String = "") -> String {
        "POST /api/now/table/incident HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\(extra)\r\n" + body
    }

    @Test("well-framed requests pass untouched, however the bytes arrive", arguments: [1, 3, 7, 4096])
    func wellFramed(piece: Int) throws {
        let body = #"{"a":"b"}"#
        let requests = Self.chunked("9;ext=1\r\n\(body)\r\n0\r\nX-Trailer: y\r\n\r\n")
            + "POST /x HTTP/1.1\r\nContent-Length: 9\r\n\r\n\(body)"
            + "GET /health HTTP/1.1\r\n\r\n"
            + Self.chunked("3e8\r\n" + String(repeating: "z", count: 1_000) + "\r\n0\r\n\r\n", extra: "Content-Type: text/plain\r\n")
        let (passed, error) = try Self.feed(requests, piece: piece)
        #expect(error == nil)
        #expect(passed == requests)
    }

    @Test("a chunk over the limit is a too large body; one beyond any real body is malformed; both at once", arguments: [1, 5, 4096])
    func refused(piece: Int) throws {
        let tooLarge = try Self.feed(Self.chunked("3e9\r\nabc"), piece: piece)
        #expect(tooLarge.error is NIOTooManyBytesError)
        let absurd = try Self.feed(Self.chunked("ffffffffffffffff\r\nabc\r\n"), piece: piece)
        #expect((absurd.error as? HTTPParserError) == .invalidChunkSize)
        let overflowing = try Self.feed(Self.chunked("1ffffffffffffffff\r\n"), piece: piece)
        #expect((overflowing.error as? HTTPParserError) == .invalidChunkSize)
        // After a good request on the same connection too.
        let second = try Self.feed(Self.chunked("1\r\na\r\n0\r\n\r\n") + Self.chunked("ffffffffffffffff\r\n"), piece: piece)
        #expect((second.error as? HTTPParserError) == .invalidChunkSize)
    }

    @Test("upgrades, CONNECT and what it cannot read make it stand aside")
    func standsAside() throws {
        let upgrade = "GET /graphql HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" + "ffffffffffffffff\r\n"
        #expect(try Self.feed(upgrade, piece: 4096).error == nil)
        let connect = "CONNECT x:443 HTTP/1.1\r\n\r\n" + Self.chunked("ffffffffffffffff\r\n")
        #expect(try Self.feed(connect, piece: 4096).error == nil)
        // A size line that is no size: the parser judges it.
        #expect(try Self.feed(Self.chunked("zz\r\n") + Self.chunked("ffffffffffffffff\r\n"), piece: 4096).error == nil)
    }
}
