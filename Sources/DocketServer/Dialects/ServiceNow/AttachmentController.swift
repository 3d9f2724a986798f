import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The Attachment API: `/api/now[/v1]/attachment`: list and read metadata, download, upload (raw body or
/// multipart form), delete.
struct AttachmentController {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let configuration: Configuration
    let uploads: UploadGate

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get(use: list)
        routes.post("file", use: uploadRaw)
        routes.post("upload", use: uploadMultipart)
        routes.get(":sys_id", use: metadata)
        routes.get(":sys_id/file", use: download)
        routes.delete(":sys_id", use: delete)
        return routes
    }

    /// ServiceNow's default page size for attachment lists.
    static let defaultLimit = 1000

    @Sendable func list(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let table = try store.table("sys_attachment")
        var parameters = try TableParameters(
            query: request.uri.query, table: table, catalog: store.catalog, maxPageSize: configuration.maxPageSize
        )
        if !parameters.all.contains(where: { $0.0 == "sysparm_limit" }) { parameters.limit = Self.defaultLimit }
        let page = try await store.list(
            RecordQuery(
                table: "sys_attachment", query: parameters.query, limit: parameters.limit, offset: parameters.offset
            ),
            caller: caller
        )
        let baseURL = BaseURL.of(request, configuration: configuration)
        return ListResponse.make(
            page.records, total: page.total, parameters: parameters, baseURL: baseURL, path: request.uri.path,
            bytesPerRecord: 1024
        ) { record, writer in writer.value(Self.metadata(record, baseURL: baseURL)) }
    }

    @Sendable func metadata(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let record = try await store.attachment(try context.parameters.require("sys_id"), caller: caller)
        let baseURL = BaseURL.of(request, configuration: configuration)
        return Response.json(.object(["result": Self.metadata(record, baseURL: baseURL)]))
    }

    @Sendable func download(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (record, content) = try await store.attachmentContent(try context.parameters.require("sys_id"), caller: caller)
        let baseURL = BaseURL.of(request, configuration: configuration)
        let contentType = record["content_type"].isEmpty ? "application/octet-stream" : record["content_type"]
        var headers: HTTPFields = [
            .contentType: contentType, .contentLength: String(content.reduce(0) { $0 + $1.readableBytes }),
            .contentDisposition: "attachment;filename=\"\(Self.quoted(record["file_name"]))\"",
        ]
        headers[.xAttachmentMetadata] = String(decoding: Self.metadata(record, baseURL: baseURL).serialized(), as: UTF8.self)
        return Response(status: .ok, headers: headers, body: ResponseBody(contentsOf: content))
    }

    /// `POST …/file?table_name=&table_sys_id=&file_name=` with the file as the body.
    @Sendable func uploadRaw(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let query = Dictionary(FormQuery.parse(request.uri.query), uniquingKeysWith: { first, _ in first })
        let missing = ["table_name", "table_sys_id", "file_name"].filter { query[$0, default: ""].isEmpty }
        guard missing.isEmpty else {
            throw ServiceNowError.badRequest(
                "Missing parameters", detail: "Required: " + missing.joined(separator: ", ")
            )
        }
        guard let contentType = request.headers[.contentType], !contentType.isEmpty else {
            throw ServiceNowError.badRequest("Content-Type is required", detail: "Send the file's MIME type as Content-Type")
        }
        let sysID = try await admitted(caller) {
            // Read whole before the write: the write lock is never held while a client sends.
            let content = try await collect(request)
            return try await store.addAttachment(
                .init(
                    tableName: query["table_name"]!, recordID: query["table_sys_id"]!, fileName: query["file_name"]!,
                    contentType: contentType, content: content
                ),
                caller: caller, quota: quota
            )
        }
        return try await created(sysID, request: request, caller: caller, content: true)
    }

    /// `POST …/upload` with a multipart form: `table_name`, `table_sys_id`, then the file part.
    @Sendable func uploadMultipart(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        guard let type = request.headers[.contentType], type.lowercased().hasPrefix("multipart/form-data"),
            let boundary = MultipartForm.boundary(type)
        else {
            throw ServiceNowError.badRequest(
                "Invalid content type", detail: "Use multipart/form-data with a boundary for /upload"
            )
        }
        let sysID = try await admitted(caller) {
            let form: MultipartForm
            do {
                form = try await MultipartForm.read(
                    request.body, boundary: boundary, limit: configuration.maxAttachmentSize, length: request.announcedLength
                )
            } catch MultipartForm.Failure.tooLarge {
                throw Self.tooLarge(configuration.maxAttachmentSize)
            } catch MultipartForm.Failure.malformed {
                throw ServiceNowError.badRequest("Invalid multipart body", detail: "The form could not be parsed")
            }
            let fields = form.fields
            guard let file = form.files.last else {
                throw ServiceNowError.badRequest("Missing file", detail: "The form has no file part")
            }
            let missing = ["table_name", "table_sys_id"].filter { fields[$0, default: ""].isEmpty }
            guard missing.isEmpty else {
                throw ServiceNowError.badRequest("Missing parameters", detail: "Required: " + missing.joined(separator: ", "))
            }
            return try await store.addAttachment(
                .init(
                    tableName: fields["table_name"]!, recordID: fields["table_sys_id"]!,
                    fileName: fields["file_name"].flatMap { $0.isEmpty ? nil : $0 } ?? file.fileName ?? "",
                    contentType: file.contentType ?? "application/octet-stream", content: file.body
                ),
                caller: caller, quota: quota
            )
        }
        return try await created(sysID, request: request, caller: caller, content: false)
    }

    @Sendable func delete(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        try await store.delete(try context.parameters.require("sys_id"), from: "sys_attachment", caller: caller)
        return Response(status: .noContent)
    }

    // MARK: Helpers

    /// The body in one buffer, made as large as the announced length at once (growing it would copy it).
    private func collect(_ request: Request) async throws -> ByteBuffer {
        let limit = configuration.maxAttachmentSize
        let length = request.announcedLength
        if let length, length > limit { throw Self.tooLarge(limit) }
        var buffer = ByteBufferAllocator().buffer(capacity: length ?? 0)
        do {
            try await request.body.collect(upTo: limit, into: &buffer)
        } catch is NIOTooManyBytesError {
            throw Self.tooLarge(limit)
        }
        return buffer
    }

    private static func tooLarge(_ limit: Int) -> ServiceNowError {
        ServiceNowError(.contentTooLarge, "Request body too large", detail: "Attachments are limited to \(limit) bytes")
    }

    /// Runs an upload in one of the instance's upload places: 503 when they are all taken, 429 when the caller
    /// already has their share, both with `Retry-After`, before any of the body is read.
    private func admitted(_ caller: Caller, _ upload: () async throws -> String) async throws -> String {
        do {
            return try await uploads.admit(user: caller.userName, upload)
        } catch let refusal as UploadGate.Refusal {
            var error =
                refusal == .busy
                ? ServiceNowError(.serviceUnavailable, "Server busy", detail: "Too many uploads are in progress; try again shortly")
                : ServiceNowError(
                    .tooManyRequests, "Too many uploads at once",
                    detail: "A user may send \(uploads.perUser) attachments at a time; wait for one to finish"
                )
            error.headers[.retryAfter] = UploadGate.Refusal.retryAfter
            throw error
        }
    }

    /// 201 with the new metadata. `Location` keeps the API version the client called: a raw upload
    /// (`…/file`) points at the new attachment's content, `…/attachment/<sys_id>/file`, as an instance does;
    /// a multipart upload at its metadata.
    private var quota: AttachmentQuota {
        AttachmentQuota(perRecord: configuration.attachmentQuotaPerRecord, perUser: configuration.attachmentQuotaPerUser)
    }

    private func created(_ sysID: String, request: Request, caller: Caller, content: Bool) async throws -> Response {
        let record = try await store.attachment(sysID, caller: caller)
        let baseURL = BaseURL.of(request, configuration: configuration)
        var response = Response.json(.object(["result": Self.metadata(record, baseURL: baseURL)]), status: .created)
        let api = request.uri.path.hasPrefix("/api/now/v1/") ? "/api/now/v1" : "/api/now"
        response.headers[.location] = "\(baseURL)\(api)/attachment/\(sysID)" + (content ? "/file" : "")
        return response
    }

    /// The metadata object: every value a string, plus the download link.
    static func metadata(_ record: Record, baseURL: String) -> JSONValue {
        let names = [
            "size_bytes", "file_name", "sys_mod_count", "average_image_color", "image_width", "sys_updated_on",
            "sys_tags", "table_name", "sys_id", "image_height", "sys_updated_by", "content_type", "sys_created_on",
            "size_compressed", "compressed", "table_sys_id", "hash", "sys_created_by",
        ]
        var members = names.map { name in (name, JSONValue.string(name == "sys_id" ? record.sysID : record[name])) }
        members.append(("download_link", .string("\(baseURL)/api/now/attachment/\(record.sysID)/file")))
        return JSONValue(members: members)
    }

    private static func quoted(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "_").replacingOccurrences(of: "\"", with: "_")
            .replacingOccurrences(of: "\r", with: "").replacingOccurrences(of: "\n", with: "")
    }
}

extension HTTPField.Name {
    static let xAttachmentMetadata = Self("X-Attachment-Metadata")!
}
