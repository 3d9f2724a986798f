import Foundation
import Hummingbird
import NIOCore

/// A submitted HTML form: `application/x-www-form-urlencoded`, or `multipart/form-data` (file uploads).
struct WebForm: Sendable {
    var fields: [String: String] = [:]
    var files: [MultipartForm.Part] = []

    subscript(_ name: String) -> String? { fields[name] }

    /// The trimmed value of a field, nil when empty.
    func text(_ name: String) -> String? {
        let value = fields[name]?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        return value.isEmpty ? nil : value
    }

    /// Reads the request's form (bounded by the request size limit) and checks its CSRF token. A multipart form
    /// is parsed as it arrives, each file held once.
    static func read(_ request: Request, context: DocketRequestContext, sessions: WebSessions) async throws -> WebForm {
        let type = request.headers[.contentType]?.lowercased() ?? ""
        var form = WebForm()
        if type.hasPrefix("multipart/form-data") {
            guard let boundary = MultipartForm.boundary(request.headers[.contentType] ?? "") else {
                throw WebError(.badRequest, "The form could not be read (no multipart boundary).")
            }
            let multipart: MultipartForm
            do {
                multipart = try await MultipartForm.read(
                    request.body, boundary: boundary, limit: context.maxUploadSize,
                    length: request.announcedLength
                )
            } catch MultipartForm.Failure.tooLarge {
                throw WebError(.contentTooLarge, "That is more than this server accepts in one request.")
            } catch MultipartForm.Failure.malformed {
                throw WebError(.badRequest, "The form could not be read.")
            }
            form.fields = multipart.fields
            form.files = multipart.files
        } else if type.isEmpty || type.hasPrefix("application/x-www-form-urlencoded") {
            var request = request
            let bytes: ByteBuffer
            do {
                bytes = try await request.collectBody(upTo: context.maxUploadSize)
            } catch is NIOTooManyBytesError {
                throw WebError(.contentTooLarge, "That is more than this server accepts in one request.")
            }
            form.fields = Self.decode(String(buffer: bytes))
        } else {
            throw WebError(.unsupportedMediaType, "Forms are sent as application/x-www-form-urlencoded or multipart/form-data.")
        }
        try sessions.verify(form, request: request, context: context)
        return form
    }

    /// `a=1&b=x+y%21` → ["a": "1", "b": "x y!"]; a name given twice keeps its last value.
    static func decode(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in pairs(text) { fields[name] = value }
        return fields
    }

    /// Every name and value in order, a name given twice (checkboxes) twice.
    static func pairs(_ text: String) -> [(name: String, value: String)] {
        text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func unescape(_ part: Substring) -> String {
                let spaced = part.replacingOccurrences(of: "+", with: " ")
                return spaced.removingPercentEncoding ?? spaced
            }
            return (unescape(parts[0]), parts.count > 1 ? unescape(parts[1]) : "")
        }
    }
}
