import Foundation
import Hummingbird
import MultipartKit
import NIOCore

/// A `multipart/form-data` body read as it arrives: MultipartKit's parser is fed each chunk of the request, and
/// each part's bytes are gathered into one buffer of its own, so a file is held once, never the whole body and
/// then its parts again.
struct MultipartForm: Sendable {
    struct Part: Sendable {
        var name = ""
        var fileName: String?
        var contentType: String?
        var body = ByteBuffer()

        /// The part's bytes as text (form fields).
        var text: String { String(buffer: body) }
    }

    enum Failure: Error, Equatable {
        /// More than the limit arrived.
        case tooLarge
        /// Not a well-formed multipart body (or one cut short).
        case malformed
    }

    var parts: [Part] = []

    /// The fields that are not files, by name (the last of a name wins).
    var fields: [String: String] {
        var fields: [String: String] = [:]
        for part in parts where part.fileName == nil { fields[part.name] = part.text }
        return fields
    }

    /// The parts that are files.
    var files: [Part] { parts.filter { $0.fileName != nil } }

    /// The boundary named in a `multipart/form-data` content type; nil when it names none.
    static func boundary(_ contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, pair[0].lowercased() == "boundary" else { continue }
            let value = pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            return value.isEmpty ? nil : value
        }
        return nil
    }

    /// Reads `body` to its end, refusing more than `limit` bytes. With the body's announced `length`, a part's
    /// buffer is made as large as the rest of the body once, instead of growing (and being copied) as it fills.
    /// Errors of the body itself (a malformed chunk, a connection that went away) are thrown as they are.
    static func read(
        _ body: some AsyncSequence<ByteBuffer, any Error>, boundary: String, limit: Int, length: Int? = nil
    ) async throws -> MultipartForm {
        let reader = Reader(boundary: boundary)
        if let length, length > limit { throw Failure.tooLarge }
        for try await chunk in body {
            let (sum, overflow) = reader.received.addingReportingOverflow(chunk.readableBytes)
            guard !overflow, sum <= limit else { throw Failure.tooLarge }
            reader.remaining = length.map { max(0, $0 - reader.received) }
            reader.received = sum
            try reader.feed(chunk)
        }
        return try reader.finish()
    }

    /// Parses a whole body at once (tests, and bodies already in memory).
    static func parse(_ bytes: ByteBuffer, boundary: String) throws(Failure) -> MultipartForm {
        let reader = Reader(boundary: boundary)
        do { try reader.feed(bytes) } catch { throw .malformed }
        return try reader.finish()
    }

    /// The parser and the part being read; used by one task at a time.
    private final class Reader {
        let parser: MultipartParser
        var form = MultipartForm()
        var current = Part()
        var inPart = false
        /// Bytes read so far, and how many the body still announces (before the chunk being parsed).
        var received = 0
        var remaining: Int?

        init(boundary: String) {
            parser = MultipartParser(boundary: boundary)
            parser.onHeader = { [unowned self] name, value in
                inPart = true
                switch name.lowercased() {
                case "content-disposition":
                    for parameter in value.split(separator: ";").dropFirst() {
                        let pair = parameter.split(separator: "=", maxSplits: 1)
                            .map { $0.trimmingCharacters(in: .whitespaces) }
                        guard pair.count == 2 else { continue }
                        let text = pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                        switch pair[0].lowercased() {
                        case "name": current.name = text
                        case "filename": current.fileName = text
                        default: break
                        }
                    }
                case "content-type": current.contentType = value
                default: break
                }
            }
            parser.onBody = { [unowned self] slice in
                inPart = true
                // A file's buffer is made as large as the rest of the body at once; fields are small.
                if current.fileName != nil, current.body.capacity == 0, let remaining, remaining > slice.readableBytes {
                    current.body.reserveCapacity(remaining)
                }
                current.body.writeBuffer(&slice)
            }
            parser.onPartComplete = { [unowned self] in
                form.parts.append(current)
                current = Part()
                inPart = false
            }
        }

        func feed(_ chunk: ByteBuffer) throws(Failure) {
            do { try parser.execute(chunk) } catch { throw .malformed }
        }

        /// The form, unless the body ended inside a part.
        func finish() throws(Failure) -> MultipartForm {
            guard !inPart else { throw .malformed }
            return form
        }
    }
}

extension Request {
    /// The body's `Content-Length`, when it gives one (a buffer for the body can then be made once, at its size).
    var announcedLength: Int? {
        headers[.contentLength].flatMap { Int($0) }.flatMap { $0 >= 0 ? $0 : nil }
    }
}
