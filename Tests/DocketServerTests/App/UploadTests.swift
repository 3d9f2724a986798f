import Foundation
import HummingbirdTesting
import NIOCore
import NIOPosix
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import DocketServer

/// Uploads are bounded: a place is taken before the body is read, refused at once beyond the bound, and given
/// back whatever happens; multipart bodies are parsed as they arrive.
@Suite("Uploads")
struct UploadTests {
    @Test("the gate refuses a user's third upload (userBusy) and anyone beyond the total (busy), and frees places on success and failure")
    func gate() async throws {
        let gate = UploadGate(total: 3, perUser: 2)
        let release = AsyncStream<Void>.makeStream()
        let started = AsyncStream<Void>.makeStream()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for user in ["john", "john", "abel"] {
                group.addTask {
                    try await gate.admit(user: user) {
                        started.continuation.yield()
                        for await _ in release.stream { break }
                    }
                }
            }
            var iterator = started.stream.makeAsyncIterator()
            for _ in 0..<3 { await iterator.next() }
            #expect(gate.inProgress == 3)
            await #expect(throws: UploadGate.Refusal.userBusy) { try await gate.admit(user: "john") {} }
            await #expect(throws: UploadGate.Refusal.busy) { try await gate.admit(user: "beth") {} }
            release.continuation.finish()
            try await group.waitForAll()
        }
        #expect(gate.inProgress == 0)
        struct Failed: Error {}
        await #expect(throws: Failed.self) { try await gate.admit(user: "john") { throw Failed() } }
        #expect(gate.inProgress == 0)
        #expect(try await gate.admit(user: "john") { 42 } == 42)
    }

    static let boundary = "XyZ"
    static let body =
        "preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"table_name\"\r\n\r\nincident\r\n"
        + "--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.bin\"\r\nContent-Type: application/x\r\n\r\n"
        + "one\r\n--Xy and more\r\n--XyZ--\r\nepilogue"

    @Test("a multipart body fed in pieces of any size gives the same fields and file")
    func multipartInPieces() async throws {
        let bytes = Array(Self.body.utf8)
        for size in [1, 2, 3, 7, 16, bytes.count] {
            var chunks: [ByteBuffer] = []
            var start = 0
            while start < bytes.count {
                chunks.append(ByteBuffer(bytes: bytes[start..<min(bytes.count, start + size)]))
                start += size
            }
            let stream = AsyncThrowingStream<ByteBuffer, any Error> { continuation in
                for chunk in chunks { continuation.yield(chunk) }
                continuation.finish()
            }
            let form = try await MultipartForm.read(stream, boundary: Self.boundary, limit: 10_000)
            #expect(form.fields == ["table_name": "incident"], "\(size)")
            #expect(form.files.count == 1, "\(size)")
            #expect(form.files.first?.fileName == "a.bin")
            #expect(form.files.first?.contentType == "application/x")
            #expect(form.files.first.map { String(buffer: $0.body) } == "one\r\n--Xy and more")
        }
    }

    @Test("a multipart body over the limit, cut short, or not multipart at all is refused")
    func multipartRefusals() async throws {
        func read(_ text: String, limit: Int = 10_000) async throws -> MultipartForm {
            let stream = AsyncThrowingStream<ByteBuffer, any Error> { continuation in
                continuation.yield(ByteBuffer(string: text))
                continuation.finish()
            }
            return try await MultipartForm.read(stream, boundary: Self.boundary, limit: limit)
        }
        await #expect(throws: MultipartForm.Failure.tooLarge) { try await read(Self.body, limit: 50) }
        let cut = String(Self.body.prefix(Self.body.count - 30))
        await #expect(throws: MultipartForm.Failure.malformed) { try await read(cut) }
        await #expect(throws: MultipartForm.Failure.malformed) {
            try await read("--XyZ\r\nContent-Disposition form-data\r\n\r\nx\r\n--XyZ--\r\n")
        }
        // Nothing that looks like a part: an empty form, which callers refuse for its missing file.
        #expect(try await read("garbage").parts.isEmpty)
        #expect(MultipartForm.boundary("multipart/form-data; boundary=\"a b\"") == "a b")
        #expect(MultipartForm.boundary("multipart/form-data; boundary=") == nil)
    }

    /// A connection that sent the head of an upload and part of its body, and holds it.
    final class HeldUpload: Sendable {
        let channel: any Channel
        let collector: ConnectionGuardTests.Collector

        init(port: Int, user: String, password: String = "password", length: Int) async throws {
            let collector = ConnectionGuardTests.Collector()
            self.collector = collector
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector) }
                }
                .connect(host: "127.0.0.1", port: port).get()
            let head =
                "POST /api/now/attachment/file?table_name=incident&table_sys_id=\(Demo.incident1)&file_name=held.bin HTTP/1.1\r\n"
                + "Host: x\r\nAccept: application/json\r\nContent-Type: application/octet-stream\r\nContent-Length: \(length)\r\n"
                + "Authorization: Basic \(Data("\(user):\(password)".utf8).base64EncodedString())\r\n\r\n"
            try await channel.writeAndFlush(ByteBuffer(string: head + "x"))
        }

        /// Sends the rest of the body; the status line of the answer.
        func finish(length: Int) async throws -> String {
            try await channel.writeAndFlush(ByteBuffer(repeating: UInt8(ascii: "x"), count: length - 1))
            for _ in 0..<100 {
                let text = String(decoding: collector.received.withLock { $0 }, as: UTF8.self)
                if let line = text.split(separator: "\r\n").first, text.contains("\r\n\r\n") {
                    try? await channel.close()
                    return String(line)
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            try? await channel.close()
            return ""
        }

        /// Whether the server answered already (it must not while the body is still coming).
        var answered: Bool { !collector.received.withLock { $0 }.isEmpty }

        /// What the server answered so far.
        var head: String { String(decoding: collector.received.withLock { $0 }, as: UTF8.self) }
    }

    @Test("uploads beyond the bound are refused before their body is read: 429 for a user's third, 503 beyond the instance's, both with Retry-After", .timeLimit(.minutes(3)))
    func boundedLive() async throws {
        try await ConnectionGuardTests.withServer(configure: {
            $0.concurrentUploads = 3
            $0.concurrentUploadsPerUser = 2
            $0.idleTimeout = .seconds(30)
        }) { port in
            let length = 100_000
            /// Waits until exactly one of `uploads` is answered; that answer's head, and the others.
            func oneRefused(_ uploads: [HeldUpload]) async throws -> (String, [HeldUpload]) {
                for _ in 0..<200 {
                    if uploads.contains(where: \.answered) { break }
                    try await Task.sleep(for: .milliseconds(25))
                }
                // A moment more, in which no other may be answered.
                try await Task.sleep(for: .milliseconds(300))
                let answered = uploads.filter(\.answered)
                #expect(answered.count == 1)
                return (answered.first?.head ?? "", uploads.filter { !$0.answered })
            }
            // A user's third upload at once is refused, whichever of the three comes last.
            var johns: [HeldUpload] = []
            for _ in 0..<3 { johns.append(try await HeldUpload(port: port, user: "john.doe", length: length)) }
            let (tooMany, admitted) = try await oneRefused(johns)
            #expect(tooMany.hasPrefix("HTTP/1.1 429"))
            #expect(tooMany.contains("Retry-After: 2"))
            // With the instance's third place taken, a fourth upload is refused, whoever sends it.
            let others = [
                try await HeldUpload(port: port, user: "abel.tuter", length: length),
                try await HeldUpload(port: port, user: "admin", password: "admin", length: length),
            ]
            let (busy, running) = try await oneRefused(others)
            #expect(busy.hasPrefix("HTTP/1.1 503"))
            #expect(busy.contains("Retry-After: 2"))
            // Each admitted upload completes; their places are free again.
            for upload in admitted + running {
                #expect(try await upload.finish(length: length) == "HTTP/1.1 201 Created")
            }
            let client = HTTPTestClient(port: port)
            for user in ["john.doe", "john.doe", "abel.tuter"] {
                #expect(try await client.upload(user: user, password: "password").0 == 201)
            }
        }
    }
}

/// Small uploads to a live server over URLSession.
struct HTTPTestClient {
    let port: Int

    /// A one-byte raw upload to INC0010001 as `user`: the status and `Retry-After`.
    func upload(user: String, password: String) async throws -> (Int, String?) {
        var request = URLRequest(
            url: URL(string: "http://127.0.0.1:\(port)/api/now/attachment/file?table_name=incident&table_sys_id=\(Demo.incident1)&file_name=t.txt")!
        )
        request.httpMethod = "POST"
        request.httpBody = Data("t".utf8)
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue("Basic " + Data("\(user):\(password)".utf8).base64EncodedString(), forHTTPHeaderField: "Authorization")
        let (_, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        return (http.statusCode, http.value(forHTTPHeaderField: "Retry-After"))
    }
}
