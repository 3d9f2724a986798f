import Foundation

/// A record as the offline store holds it: the server's values with the user's pending changes applied over them.
public struct OfflineRecord: Sendable, Equatable {
    public let table: String
    public let sysID: String
    /// What the user sees: the server's values, then each pending operation's, in order.
    public var values: [String: String]
    /// The values as the server last sent them (empty for a record created here and not yet sent).
    public var serverValues: [String: String]
    /// The server's version of the record (`sys_mod_count`), nil until the server has it.
    public var version: Int?
    /// Whether operations on it are waiting to be sent (or settled).
    public var hasPendingChanges: Bool
    /// Deleted here, and the deletion not yet sent.
    public var isDeletedLocally: Bool
    /// When the server's values were last read.
    public var fetchedAt: Date?

    public subscript(field: String) -> String? { values[field] }
}

/// One write waiting in the outbox.
public struct PendingOperation: Sendable, Equatable, Identifiable {
    public enum Kind: String, Sendable {
        case create, update, delete
    }

    /// Where an operation stands.
    public enum State: String, Sendable {
        /// Waiting to be sent.
        case queued
        /// Being sent (after a crash it is sent again with the same idempotency key: never done twice).
        case sending
        /// The server's record changed the same fields (or was deleted): waits for ``OfflineStore/resolve(_:with:)``.
        case conflict
        /// The server refused it (its answer is ``lastError``): waits for ``OfflineStore/retry(_:)`` or
        /// ``OfflineStore/discard(_:)``; later operations on the same record wait behind it.
        case failed
    }

    public let id: Int64
    public let table: String
    public let sysID: String
    public let kind: Kind
    /// The fields it sets (a comment is `comments`).
    public var values: [String: String]
    /// The value each of those fields had when the user changed it.
    public var base: [String: String]
    /// The server version the change was made on (`If-Match`); nil for a record the server does not have yet.
    public var baseVersion: Int?
    /// Sent with every attempt, so the server applies it once however often it is sent.
    public let idempotencyKey: String
    public var state: State
    /// Why the last attempt failed, cleared when one succeeds.
    public var lastError: String?
    public var attempts: Int
    public let createdAt: Date
}

/// A change made here that meets a different change made on the server.
public struct OfflineConflict: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// Both changed `field`, to different values.
        case field
        /// The record was deleted on the server; the operation changes it.
        case deletedOnServer
        /// The operation deletes the record; the server's changed since it was read.
        case changedOnServer
    }

    public let operationID: Int64
    public let table: String
    public let sysID: String
    /// The record's number (`INC0010001`), when it has one.
    public let number: String?
    public let kind: Kind
    /// The field, for ``Kind/field``; empty otherwise.
    public let field: String
    /// The value both started from, the user's, and the server's (nil where there is none).
    public let base: String?
    public let mine: String?
    public let theirs: String?
}

/// How a conflict is settled.
public enum Resolution: Sendable, Equatable {
    /// The user's value (or deletion, or edit of a record deleted on the server: the record is created again).
    case mine
    /// The server's value (the operation's part of it is dropped).
    case theirs
    /// Another value for the field.
    case value(String)
}

/// What a ``OfflineStore/sync()`` did.
public struct SyncReport: Sendable, Equatable {
    /// Operations the server accepted.
    public var sent = 0
    /// Operations that now wait for a decision.
    public var conflicts = 0
    /// Operations the server refused.
    public var failed = 0
    /// Operations still waiting.
    public var remaining = 0
    /// Changes from the server applied to the store.
    public var applied = 0
    /// The server asked for credentials again: nothing was lost, sending resumes after sign-in.
    public var needsSignIn = false
    /// The server could not be reached (or was unavailable), and why: everything waits for the next try.
    public var unreachable: String? = nil
    /// Whether the store had to read its records again (the event log no longer reached back).
    public var refetched = false
}
