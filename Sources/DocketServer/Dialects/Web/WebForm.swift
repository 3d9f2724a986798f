import Foundation
import Hummingbird
import NIOCore

/// A submitted HTML form: `application/x-www-form-urlencoded`, or `multipart/form-data` (file uploads).
struct WebForm: Sendable {
    var fields: [String: String] = [:]
    var files: [AttachmentController.FormPart] = []

    subscript(_ name: String) -> String? { fields[name] }

    /// The trimmed value of a field, nil when empty.
    func text(_ name: String) -> String? {
        let value = fields[name]?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        return value.isEmpty ? nil : value
    }

    /// Reads the request's form (bounded by the request size limit) and checks its CSRF token.
    static func read(_ request: Request, context: DocketRequestContext, sessions: WebSessions) async throws -> WebForm {
        var request = request
        let type = request.headers[.contentType]?.lowercased() ?? ""
        let bytes: ByteBuffer
        do {
            bytes = try await request.collectBody(upTo: context.maxUploadSize)
        } catch is NIOTooManyBytesError {
            throw WebError(.contentTooLarge, "That is more than this server accepts in one request.")
        }
        var form = WebForm()
        if type.hasPrefix("multipart/form-data") {
            guard let boundary = AttachmentController.boundary(request.headers[.contentType] ?? "") else {
                throw WebError(.badRequest, "The form could not be read (no multipart boundary).")
            }
            let parts: [AttachmentController.FormPart]
            do {
                parts = try AttachmentController.parts(of: Array(bytes.readableBytesView), boundary: boundary)
            } catch {
                throw WebError(.badRequest, "The form could not be read.")
            }
            for part in parts {
                if part.fileName != nil {
                    form.files.append(part)
                } else {
                    form.fields[part.name] = String(decoding: part.body, as: UTF8.self)
                }
            }
        } else if type.isEmpty || type.hasPrefix("application/x-www-form-urlencoded") {
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
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func unescape(_ part: Substring) -> String {
                let spaced = part.replacingOccurrences(of: "+", with: " ")
                return spaced.removingPercentEncoding ?? spaced
            }
            fields[unescape(parts[0])] = parts.count > 1 ? unescape(parts[1]) : ""
        }
        return fields
    }
}
