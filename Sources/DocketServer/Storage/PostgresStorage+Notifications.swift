import Logging
import PostgresNIO

/// The event log's notifications on PostgreSQL: what other instances announce after their commits
/// (``PostgresStorage/announce(_:)``), heard on a connection of its own.
extension PostgresStorage {
    /// Notification channels are `docket_` and the schema's name, so that deployments in different schemas of
    /// one database do not wake each other.
    static let channelPrefix = "docket_"

    /// Listens on a connection of its own; when it breaks, connects again (waiting up to 5 s between tries)
    /// and signals once after each connection, since notifications sent meanwhile were lost.
    func logSignals(ignoring: @escaping @Sendable (Int) -> Bool) -> AsyncStream<Void>? {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let (location, logger, presence) = (self.location, self.logger, self.presence)
        let task = Task {
            var delay = Duration.milliseconds(100)
            // Since when the notifications were lost, to say when they are back.
            var lostSince: ContinuousClock.Instant? = nil
            while !Task.isCancelled {
                do {
                    let connection = try await PostgresConnection.connect(
                        configuration: try location.connectionConfiguration(searchPath: true), id: 2, logger: logger
                    )
                    do {
                        // Bounded: a server that never answers would otherwise leave this listener waiting for ever.
                        guard let schema = try await bounded(PostgresStorage.leaseTimeout, {
                            try await PostgresRunner(connection: connection, logger: logger)
                                .rows("SELECT current_schema() AS name").first?.value(at: "name", kind: .text).text ?? "public"
                        }) else {
                            throw StorageUnavailable(reason: "no answer to SELECT current_schema() within \(PostgresStorage.leaseTimeout)")
                        }
                        try await connection.listen(on: Self.channelPrefix + schema) { notifications in
                            presence.listening(true)
                            defer { presence.listening(false) }
                            continuation.yield()
                            delay = .milliseconds(100)
                            if let since = lostSince {
                                logger.notice(
                                    "Listening for the event log's notifications again",
                                    metadata: ["after": "\(ContinuousClock.now - since)"]
                                )
                                lostSince = nil
                            }
                            // A notification lists its events' numbers. One without (an event whose number its
                            // writer did not learn, or any other NOTIFY on the channel) wakes as any other: a
                            // wake-up too many costs a read of the log's head, one too few would leave followers
                            // behind.
                            // Since 2026-12-03 a notification lists the numbers of one or more commits
                            // (``CommitAnnouncer``): dropped only when every one of them is accounted for.
                            for try await notification in notifications {
                                // An instance announcing itself (or this one's echo) committed nothing to read.
                                if notification.payload.hasPrefix("hello:") {
                                    presence.heard(notification.payload)
                                    continue
                                }
                                if let numbers = CommitAnnouncer.Announcement.numbers(in: notification.payload),
                                    numbers.allSatisfy(ignoring)
                                {
                                    continue
                                }
                                presence.heard(notification.payload)
                                continuation.yield()
                            }
                        }
                    } catch {
                        if !Task.isCancelled {
                            logger.warning("Lost the event log's notifications; listening again", metadata: ["error": "\(Self.describe(error))"])
                            lostSince = lostSince ?? .now
                        }
                    }
                    try? await connection.close()
                } catch {
                    logger.warning("Cannot listen for the event log's notifications", metadata: ["error": "\(Self.describe(error))"])
                    lostSince = lostSince ?? .now
                }
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
