import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// An answer of the Table API before it becomes a response: what an idempotent write stores and replays.
struct TableAnswer: Sendable {
    var status: HTTPResponse.Status
    var headers: HTTPFields = [:]
    var body: [UInt8] = []

    var response: Response {
        var response = body.isEmpty && headers[.contentType] == nil
            ? Response(status: status) : Response.json(bytes: body, status: status)
        for field in headers where field.name != .contentType { response.headers.append(field) }
        return response
    }
}

/// A record's version as an HTTP entity tag: its `sys_mod_count`, which every write moves on (a comment too).
enum RecordVersion {
    /// The strong entity tag of a version: `"7"`.
    static func etag(_ modCount: String) -> String? {
        guard let count = Int(modCount), count >= 0 else { return nil }
        return "\"\(count)\""
    }

    /// What an `If-Match` header asks for: nil for none or `*` (the record exists, whatever its version), else the
    /// version the write applies to. A weak tag never matches (RFC 9110 compares strongly): it is a version no record
    /// has. More than one tag, or a malformed one, is a 400.
    static func expected(ifMatch value: String?) throws -> Int? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty, value != "*" else { return nil }
        let tags = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard tags.count == 1, let tag = tags.first else {
            throw ServiceNowError.badRequest("Invalid If-Match", detail: "Give one entity tag, as the ETag of the record's GET")
        }
        if tag.hasPrefix("W/\"") { return -1 }
        guard tag.count >= 3, tag.hasPrefix("\""), tag.hasSuffix("\""), let count = Int(tag.dropFirst().dropLast()), count >= 0 else {
            throw ServiceNowError.badRequest("Invalid If-Match", detail: "'\(tag.prefix(40))' is not an entity tag of a record (\"N\")")
        }
        return count
    }

    /// Whether `If-None-Match` names the current version (a GET then answers 304).
    static func isCurrent(ifNoneMatch value: String?, etag: String) -> Bool {
        guard let value, !value.isEmpty else { return false }
        return value.split(separator: ",").contains { tag in
            let tag = tag.trimmingCharacters(in: .whitespaces)
            // If-None-Match compares weakly.
            return tag == "*" || tag == etag || tag == "W/" + etag
        }
    }
}

/// `Idempotency-Key` on the Table API's writes (IETF httpapi draft): the first request with a key writes and its answer
/// is kept; the same key with the same request gets that answer again (`Idempotent-Replayed: true`) without writing;
/// the same key with another request is a 422. Keys are per user, remembered 24 hours, on every instance.
struct IdempotentWrites {
    let store: RecordStore

    /// Runs `write` once per key: `write` gets the claim to hand to the engine (nil without a key). `values` are the
    /// body's field values: the fingerprint is taken over them in a canonical order, so that the same request sent
    /// again with its JSON members in another order is the same request.
    func run(
        _ request: Request, values: [String: String], caller: Caller, logger: Logger,
        write: (IdempotencyClaim?) async throws -> TableAnswer, replay: (IdempotencyRecords.Stored) async throws -> TableAnswer
    ) async throws -> Response {
        guard let header = request.headers[.idempotencyKey] else { return try await write(nil).response }
        guard let key = IdempotencyClaim.key(fromHeader: header) else {
            throw ServiceNowError.badRequest(
                "Invalid Idempotency-Key", detail: "A key is 1 to \(IdempotencyClaim.maximumKeyLength) visible ASCII characters"
            )
        }
        let claim = IdempotencyClaim(
            userID: caller.userID, key: key,
            fingerprint: IdempotencyClaim.fingerprint(
                method: request.method.rawValue, target: request.uri.description,
                body: JSONValue(members: values.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }).serialized()
            )
        )
        if let stored = try await find(claim) { return try await answer(stored, claim: claim, replay: replay) }
        let answer: TableAnswer
        do {
            answer = try await write(claim)
        } catch let used as IdempotencyRecords.Used {
            // The same key came in at the same time, and the other request wrote first.
            return try await self.answer(used.record, claim: claim, replay: replay)
        } catch {
            // A write refused because another with the same key just committed (the record it deleted is gone).
            if let stored = try await find(claim) { return try await self.answer(stored, claim: claim, replay: replay) }
            throw error
        }
        do {
            try await IdempotencyRecords.storeAnswer(
                claim, status: Int(answer.status.code), contentType: answer.headers[.contentType], location: answer.headers[.location],
                etag: answer.headers[.eTag], body: String(decoding: answer.body, as: UTF8.self), storage: store.storage
            )
        } catch {
            // The write is committed with its key: a repeat is still not written again, and is answered from the
            // record as it is then.
            logger.warning("The answer to an idempotent write could not be kept", metadata: ["error": "\(error)"])
        }
        return answer.response
    }

    private func find(_ claim: IdempotencyClaim) async throws -> IdempotencyRecords.Stored? {
        try await store.storage.read { db in try await IdempotencyRecords.find(userID: claim.userID, key: claim.key, db: db) }
    }

    private func answer(
        _ stored: IdempotencyRecords.Stored, claim: IdempotencyClaim, replay: (IdempotencyRecords.Stored) async throws -> TableAnswer
    ) async throws -> Response {
        guard stored.fingerprint == claim.fingerprint else {
            throw ServiceNowError(
                .unprocessableContent, "Idempotency-Key reused",
                detail: "This key was used for another request in the last 24 hours; send a new key with a new request"
            )
        }
        var answer: TableAnswer
        if let status = stored.status {
            answer = TableAnswer(status: HTTPResponse.Status(code: status), body: Array((stored.body ?? "").utf8))
            if let type = stored.contentType, !type.isEmpty { answer.headers[.contentType] = type }
            if let location = stored.location, !location.isEmpty { answer.headers[.location] = location }
            if let etag = stored.etag, !etag.isEmpty { answer.headers[.eTag] = etag }
        } else {
            answer = try await replay(stored)
        }
        answer.headers[.idempotentReplayed] = "true"
        return answer.response
    }
}

extension HTTPField.Name {
    static let idempotencyKey = Self("Idempotency-Key")!
    static let idempotentReplayed = Self("Idempotent-Replayed")!
}
