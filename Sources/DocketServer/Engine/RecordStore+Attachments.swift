import DocketModel
import Foundation
import NIOCore

/// Attachments: metadata in `sys_attachment`, bytes in `docket_attachment_chunk` (in pieces of
/// ``attachmentChunkSize``), all written in one transaction. Access follows the parent record: the access rule on `sys_attachment` filters by the
/// readability of the record each attachment belongs to, and adding one needs that record to be readable.
extension RecordStore {
    struct AttachmentUpload: Sendable {
        var tableName: String
        var recordID: String
        var fileName: String
        var contentType: String
        /// The file, as it was read from the request: handed to storage as it is, never copied here.
        var content: ByteBuffer
    }

    /// Stores an attachment on a record the caller can see; returns its sys_id. 404 when the record is
    /// missing or hidden, 400 when the table is unknown or the file name is empty.
    func addAttachment(_ upload: AttachmentUpload, caller: Caller, quota: AttachmentQuota = .unlimited) async throws -> String {
        guard catalog.table(upload.tableName) != nil, !SchemaAdministration.tables.contains(upload.tableName) else {
            throw EngineError.badRequest("Invalid table name", detail: "Table '\(upload.tableName)' does not exist")
        }
        guard !upload.fileName.isEmpty, upload.fileName.utf8.count <= 100 else {
            throw EngineError.badRequest("Invalid file_name", detail: "file_name must be 1 to 100 characters")
        }
        do {
            _ = try await get(upload.recordID, in: upload.tableName, fields: ["sys_id"], caller: caller)
        } catch let error as EngineError where error.code == .notFound {
            throw EngineError(
                .notFound, "Invalid table_sys_id",
                detail: "Record \(upload.recordID) of \(upload.tableName) does not exist or cannot be read"
            )
        }
        let digest = Digest.sha256Hex(upload.content)
        let values: [String: String] = [
            "file_name": upload.fileName, "content_type": upload.contentType, "size_bytes": String(upload.content.readableBytes),
            "size_compressed": String(upload.content.readableBytes), "compressed": "false", "table_name": upload.tableName,
            "table_sys_id": upload.recordID, "hash": digest, "image_width": "", "image_height": "",
        ]
        let content = upload.content
        let recordID = upload.recordID
        var options = WriteOptions()
        options.exclusive = quota.perRecord != nil || (quota.perUser != nil && !caller.isAdmin)
        return try await insert(into: "sys_attachment", values: values, caller: caller, options: options) { db, sysID in
            // Checked in the writing transaction, which already counts the new row, and exclusive: concurrent
            // uploads cannot both slip under a quota.
            if let limit = quota.perRecord {
                let used = try await Self.attachmentBytes(db, "table_sys_id = " + .bind(recordID))
                if used > limit {
                    throw EngineError(
                        .quotaExceeded, "Attachment quota exceeded",
                        detail: "The attachments of a record may hold \(limit) bytes together; this upload would make \(used)"
                    )
                }
            }
            if let limit = quota.perUser, !caller.isAdmin {
                let used = try await Self.attachmentBytes(db, "sys_created_by = " + .bind(caller.userName))
                if used > limit {
                    throw EngineError(
                        .quotaExceeded, "Attachment quota exceeded",
                        detail: "A user's attachments may hold \(limit) bytes together; this upload would make \(used)"
                    )
                }
            }
            // Slices of the one buffer the request was read into: each statement carries one piece, so neither
            // driver copies more than that at once.
            var position = 0
            var rest = content
            repeat {
                let piece = rest.readSlice(length: min(Self.attachmentChunkSize, rest.readableBytes)) ?? ByteBuffer()
                try await db.run(
                    "INSERT INTO docket_attachment_chunk (sys_id, position, data) VALUES (" + .bind(sysID) + ", "
                        + .bind(position) + ", " + .bind(SQLBlob(piece)) + ")"
                )
                position += 1
            } while rest.readableBytes > 0
        }
    }

    /// The most bytes of an attachment one row (and one statement) holds.
    static let attachmentChunkSize = 256 * 1024

    private static func attachmentBytes(_ db: SQLExecutor, _ condition: SQLFragment) async throws -> Int {
        try await db.rows("SELECT COALESCE(SUM(size_bytes), 0) AS n FROM sys_attachment WHERE " + condition)
            .first?.value(at: "n", kind: .integer).intValue ?? 0
    }

    /// An attachment's metadata; 404 when it is missing or its record is hidden from the caller.
    ///
    /// The same rule as the `sys_attachment` access filter, checked in two cached reads (the attachment,
    /// then its record as the caller) instead of one statement joining every table a parent could be in.
    func attachment(_ sysID: String, caller: Caller) async throws -> Record {
        let (_, record) = try await get(sysID, in: "sys_attachment", caller: .system)
        guard !caller.isAdmin else { return record }
        guard catalog.table(record["table_name"]) != nil else { throw EngineError.notFound }
        do {
            _ = try await get(record["table_sys_id"], in: record["table_name"], fields: ["sys_id"], caller: caller)
        } catch let error as EngineError where error.code == .notFound {
            throw EngineError.notFound
        }
        return record
    }

    /// An attachment's metadata and bytes, in the pieces they are stored in (read in one statement, so they are
    /// of one version); 404 when it is missing or its record is hidden from the caller.
    func attachmentContent(_ sysID: String, caller: Caller) async throws -> (record: Record, content: [ByteBuffer]) {
        let record = try await attachment(sysID, caller: caller)
        let content = try await storage.read { db in
            try await db.rows(
                "SELECT data FROM docket_attachment_chunk WHERE sys_id = " + .bind(sysID) + " ORDER BY position"
            ).map { try $0.buffer(at: "data") ?? ByteBuffer() }
        }
        guard !content.isEmpty else { throw EngineError.notFound }
        return (record, content)
    }
}

/// Limits on the bytes attachments may hold: per record (all its attachments together) and per user (all
/// attachments a user uploaded; admins are exempt). Nil means no limit.
struct AttachmentQuota: Sendable {
    var perRecord: Int?
    var perUser: Int?

    static let unlimited = AttachmentQuota(perRecord: nil, perUser: nil)
}
