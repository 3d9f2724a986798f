import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

@Suite("Attachment API")
struct AttachmentAPITests {
    static func upload(
        _ client: any TestClientProtocol, to record: String = Demo.incident1, name: String = "notes.txt",
        bytes: [UInt8] = Array("hello, attachment".utf8), type: String = "text/plain", headers: HTTPFields = .john
    ) async throws -> TestResponse {
        var fields = headers
        fields[.contentType] = type
        return try await client.execute(
            uri: "/api/now/attachment/file?table_name=incident&table_sys_id=\(record)&file_name=\(name)",
            method: .post, headers: fields, body: ByteBuffer(bytes: bytes)
        )
    }

    @Test("upload a raw body, read its metadata, list it, download the same bytes, delete it")
    func lifecycle() async throws {
        try await TestApp.withRouter { client throws in
            let bytes = Array(0...255).map(UInt8.init) + Array("end".utf8)
            let created = try await Self.upload(client, name: "blob.bin", bytes: bytes, type: "application/octet-stream")
            #expect(created.status == .created)
            let meta = try created.result
            let id = meta.string("sys_id")
            #expect(created.headers[.location]?.hasSuffix("/api/now/attachment/\(id)/file") == true)
            #expect(meta.string("file_name") == "blob.bin")
            #expect(meta.string("size_bytes") == String(bytes.count))
            #expect(meta.string("table_name") == "incident")
            #expect(meta.string("table_sys_id") == Demo.incident1)
            #expect(meta.string("content_type") == "application/octet-stream")
            #expect(meta.string("download_link").hasSuffix("/api/now/attachment/\(id)/file"))
            #expect(meta.string("hash").count == 64)

            let single = try await client.get("/api/now/v1/attachment/\(id)")
            #expect(try single.result.string("file_name") == "blob.bin")
            let list = try await client.get("/api/now/attachment?sysparm_query=table_sys_id=\(Demo.incident1)")
            #expect(try list.results.map { $0.string("sys_id") } == [id])
            #expect(list.headers[.xTotalCount] == "1")

            let file = try await client.get("/api/now/attachment/\(id)/file")
            #expect(file.status == .ok)
            #expect(Array(file.body.readableBytesView) == bytes)
            #expect(file.headers[.contentType] == "application/octet-stream")
            #expect(file.headers[.contentLength] == String(bytes.count))
            #expect(file.headers[.xAttachmentMetadata]?.contains("\"file_name\":\"blob.bin\"") == true)

            let deleted = try await client.execute(uri: "/api/now/attachment/\(id)", method: .delete, headers: .john, body: nil)
            #expect(deleted.status == .noContent)
            #expect(try await client.get("/api/now/attachment/\(id)").status == .notFound)
            #expect(try await client.get("/api/now/attachment/\(id)/file").status == .notFound)
        }
    }

    @Test("multipart upload takes table_name, table_sys_id and the file part")
    func multipart() async throws {
        try await TestApp.withRouter { client throws in
            let boundary = "docketBoundary42"
            let body = """
                --\(boundary)\r
                Content-Disposition: form-data; name="table_name"\r
                \r
                incident\r
                --\(boundary)\r
                Content-Disposition: form-data; name="table_sys_id"\r
                \r
                \(Demo.incident1)\r
                --\(boundary)\r
                Content-Disposition: form-data; name="uploadFile"; filename="screen.png"\r
                Content-Type: image/png\r
                \r
                PNGDATA\r
                --\(boundary)--\r

                """
            var headers = HTTPFields.john
            headers[.contentType] = "multipart/form-data; boundary=\(boundary)"
            let response = try await client.execute(
                uri: "/api/now/attachment/upload", method: .post, headers: headers, body: ByteBuffer(string: body)
            )
            #expect(response.status == .created)
            let meta = try response.result
            #expect(meta.string("file_name") == "screen.png")
            #expect(meta.string("content_type") == "image/png")
            let file = try await client.get("/api/now/attachment/\(meta.string("sys_id"))/file")
            #expect(file.text == "PNGDATA")

            let broken = try await client.execute(
                uri: "/api/now/attachment/upload", method: .post, headers: headers, body: ByteBuffer(string: "garbage")
            )
            #expect(broken.status == .badRequest)
            var noBoundary = HTTPFields.john
            noBoundary[.contentType] = "multipart/form-data"
            let missing = try await client.execute(
                uri: "/api/now/attachment/upload", method: .post, headers: noBoundary, body: ByteBuffer(string: body)
            )
            #expect(missing.status == .badRequest)
        }
    }

    @Test("access follows the record: hidden records can be neither attached to nor read")
    func access() async throws {
        try await TestApp.withRouter { client throws in
            let hidden = try await Self.upload(client, to: Demo.incident3)
            #expect(hidden.status == .created)
            let id = try hidden.result.string("sys_id")
            // abel.tuter cannot read INC0010003, so neither its attachments.
            #expect(try await Self.upload(client, to: Demo.incident3, headers: .abel).status == .notFound)
            #expect(try await client.get("/api/now/attachment/\(id)", .abel).status == .notFound)
            #expect(try await client.get("/api/now/attachment/\(id)/file", .abel).status == .notFound)
            #expect(try await client.get("/api/now/attachment", .abel).results.allSatisfy { $0.string("sys_id") != id })
            let delete = try await client.execute(uri: "/api/now/attachment/\(id)", method: .delete, headers: .abel, body: nil)
            #expect(delete.status == .notFound)
            #expect(try await client.get("/api/now/attachment/\(id)").status == .ok)
            // …but he may attach to his own incident.
            #expect(try await Self.upload(client, to: Demo.incident1, headers: .abel).status == .created)
        }
    }

    @Test("deleting a record deletes its attachments")
    func cascade() async throws {
        try await TestApp.withRouter { client throws in
            let record = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"with files"}"#)
            let recordID = try record.result.string("sys_id")
            let id = try await Self.upload(client, to: recordID).result.string("sys_id")
            #expect(try await client.get("/api/now/attachment/\(id)").status == .ok)
            let deleted = try await client.execute(uri: "/api/now/table/incident/\(recordID)", method: .delete, headers: .john, body: nil)
            #expect(deleted.status == .noContent)
            #expect(try await client.get("/api/now/attachment/\(id)").status == .notFound)
        }
    }

    @Test("bad uploads are 4xx: missing parameters, no content type, unknown table or record, too large")
    func badUploads() async throws {
        try await TestApp.withRouter(configure: { $0.maxAttachmentSize = 1000 }) { client throws in
            var headers = HTTPFields.john
            headers[.contentType] = "text/plain"
            let missing = try await client.execute(
                uri: "/api/now/attachment/file?table_name=incident", method: .post, headers: headers,
                body: ByteBuffer(string: "x")
            )
            #expect(missing.status == .badRequest)
            let noType = try await client.execute(
                uri: "/api/now/attachment/file?table_name=incident&table_sys_id=\(Demo.incident1)&file_name=a",
                method: .post, headers: .john, body: ByteBuffer(string: "x")
            )
            #expect(noType.status == .badRequest)
            let table = try await client.execute(
                uri: "/api/now/attachment/file?table_name=nope&table_sys_id=\(Demo.incident1)&file_name=a",
                method: .post, headers: headers, body: ByteBuffer(string: "x")
            )
            #expect(table.status == .badRequest)
            #expect(try await Self.upload(client, to: "0123456789abcdef0123456789abcdef").status == .notFound)
            let large = try await Self.upload(client, bytes: Array(repeating: 7, count: 1001))
            #expect(large.status == .contentTooLarge)
            #expect(large.errorMessage == "Request body too large")
            #expect(try await client.get("/api/now/attachment", .admin).results.isEmpty)
        }
    }

    @Test("a file larger than a stored piece is stored in pieces and comes back whole, by raw and multipart upload; deleting it removes every piece")
    func pieces() async throws {
        try await TestApp.withRouter { client throws in
            let size = RecordStore.attachmentChunkSize * 2 + 1234
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
            let raw = try await Self.upload(client, name: "big.bin", bytes: bytes, type: "application/octet-stream")
            #expect(raw.status == .created)
            let id = try raw.result.string("sys_id")
            #expect(try raw.result.string("size_bytes") == String(size))
            #expect(try raw.result.string("hash") == Digest.sha256Hex(bytes))
            let file = try await client.get("/api/now/attachment/\(id)/file")
            #expect(file.headers[.contentLength] == String(size))
            #expect(Array(file.body.readableBytesView) == bytes)

            let boundary = "pieces7"
            var body = ByteBuffer(string: "--\(boundary)\r\nContent-Disposition: form-data; name=\"table_name\"\r\n\r\nincident\r\n")
            body.writeString("--\(boundary)\r\nContent-Disposition: form-data; name=\"table_sys_id\"\r\n\r\n\(Demo.incident1)\r\n")
            body.writeString("--\(boundary)\r\nContent-Disposition: form-data; name=\"f\"; filename=\"m.bin\"\r\n\r\n")
            body.writeBytes(bytes)
            body.writeString("\r\n--\(boundary)--\r\n")
            var headers = HTTPFields.john
            headers[.contentType] = "multipart/form-data; boundary=\(boundary)"
            let multipart = try await client.execute(uri: "/api/now/attachment/upload", method: .post, headers: headers, body: body)
            #expect(multipart.status == .created)
            let second = try multipart.result.string("sys_id")
            #expect(Array(try await client.get("/api/now/attachment/\(second)/file").body.readableBytesView) == bytes)

            let deleted = try await client.execute(uri: "/api/now/attachment/\(id)", method: .delete, headers: .john, body: nil)
            #expect(deleted.status == .noContent)
            #expect(try await client.get("/api/now/attachment/\(id)/file").status == .notFound)
            #expect(Array(try await client.get("/api/now/attachment/\(second)/file").body.readableBytesView) == bytes)
        }
    }

    @Test("an empty file is stored and served empty")
    func emptyFile() async throws {
        try await TestApp.withRouter { client throws in
            let created = try await Self.upload(client, name: "empty.txt", bytes: [])
            #expect(created.status == .created)
            let file = try await client.get("/api/now/attachment/\(try created.result.string("sys_id"))/file")
            #expect(file.status == .ok)
            #expect(file.body.readableBytes == 0)
        }
    }

    @Test("Location keeps the API version called and points a raw upload at its content")
    func locationKeepsVersion() async throws {
        try await TestApp.withRouter { client throws in
            var headers = HTTPFields.john
            headers[.contentType] = "text/plain"
            let versioned = try await client.execute(
                uri: "/api/now/v1/attachment/file?table_name=incident&table_sys_id=\(Demo.incident1)&file_name=v.txt",
                method: .post, headers: headers, body: ByteBuffer(string: "v1")
            )
            #expect(versioned.status == .created)
            let id = try versioned.result.string("sys_id")
            #expect(versioned.headers[.location]?.hasSuffix("/api/now/v1/attachment/\(id)/file") == true)
            let content = try await client.get("/api/now/v1/attachment/\(id)/file")
            #expect(String(buffer: content.body) == "v1")
        }
    }
}
