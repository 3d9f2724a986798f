import DocketModel
import Foundation
import Hummingbird
import NIOCore

/// Reads a JSON request body into field values, as the Table API accepts them.
enum RequestBody {
    /// The body's JSON, or an empty object for an empty body; a 400 in ServiceNow's words for invalid JSON.
    static func json(from request: Request, context: DocketRequestContext) async throws -> JSONValue {
        try json(try await bytes(of: request, context: context), request: request)
    }

    /// The body's bytes, up to the upload limit (a 413 in ServiceNow's words beyond it).
    static func bytes(of request: Request, context: DocketRequestContext) async throws -> ByteBuffer {
        do {
            return try await request.body.collect(upTo: context.maxUploadSize)
        } catch is NIOTooManyBytesError {
            throw ServiceNowError(
                .contentTooLarge, "Request body too large", detail: "The limit is \(context.maxUploadSize) bytes"
            )
        }
    }

    /// ``json(from:context:)`` of a body already read.
    static func json(_ buffer: ByteBuffer, request: Request) throws -> JSONValue {
        guard buffer.readableBytes > 0 else { return .object([:]) }
        // Only a request without a body may leave out its type (``ServiceNowMiddleware`` lets it through, and
        // an HTTP/2 request need not announce its length).
        if (request.headers[.contentType] ?? "").isEmpty, ![.get, .delete, .head].contains(request.method) {
            throw ServiceNowError(.unsupportedMediaType, "Unsupported Media Type", detail: "Send the body as application/json")
        }
        do {
            return try JSONValue.parse(Data(buffer.readableBytesView))
        } catch {
            throw ServiceNowError.badRequest("Exception while reading request", detail: "The payload is not valid JSON.")
        }
    }

    /// A body that must be a JSON object (the Compass and ETO dialects): the object, `{}` for an empty body, nil for
    /// anything else (each dialect says so in its own words). Bodies above `limit` throw `NIOTooManyBytesError`.
    static func object(from request: Request, upTo limit: Int) async throws -> JSONValue? {
        let bytes = try await request.body.collect(upTo: limit)
        if bytes.readableBytes == 0 { return .object([:]) }
        guard let json = try? JSONValue.parse(Array(bytes.readableBytesView)), json.objectValue != nil else { return nil }
        return json
    }

    /// Field values of a record body: strings as they are, numbers and booleans as their text, null as
    /// empty, `{"value": …}` objects as their value. Only the first record of an array is used (as
    /// ServiceNow does).
    static func record(from request: Request, context: DocketRequestContext) async throws -> [String: String] {
        try record(try await bytes(of: request, context: context), request: request)
    }

    /// ``record(from:context:)`` of a body already read.
    static func record(_ buffer: ByteBuffer, request: Request) throws -> [String: String] {
        var body = try json(buffer, request: request)
        if case .array(let elements) = body { body = elements.first ?? .object([:]) }
        return try values(of: body)
    }

    /// A JSON object's members as field values (a reference may be given as `{"value": …}`); refuses anything else.
    static func values(of body: JSONValue) throws -> [String: String] {
        guard case .object(let members) = body else {
            throw ServiceNowError.badRequest("Exception while reading request", detail: "The payload must be a JSON object.")
        }
        var values: [String: String] = [:]
        for (name, value) in members {
            guard let text = scalar(value) else {
                throw ServiceNowError.badRequest(
                    "Invalid value for field '\(name)'", detail: "Expected a string, number, boolean or null"
                )
            }
            values[name] = text
        }
        return values
    }

    private static func scalar(_ value: JSONValue) -> String? {
        switch value {
        case .null: return ""
        case .string(let text): return text
        case .bool(let flag): return flag ? "true" : "false"
        case .integer(let number): return String(number)
        case .number(let number):
            return number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
        case .object:
            return value["value"].flatMap(scalar)
        case .array:
            return nil
        }
    }
}
