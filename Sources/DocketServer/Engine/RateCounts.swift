/// Rate-limit counters kept in the database, per counter (rule and user) and hourly window, where several
/// docketd share it: each request is counted once, whichever instance it reached (see ``RateLimiter``).
struct RateCounts: Sendable {
    let storage: any Storage

    /// Counts a request (one atomic upsert, outside the write lock); returns the count before it. Once the count
    /// reaches `limit` it stays there: refused requests are not counted.
    func count(_ counter: String, window: Int, limit: Int) async throws -> Int {
        try await storage.writeUnordered { db in
            let rows = try await db.rows(
                "INSERT INTO docket_rate_count (counter, window_start, count) VALUES (" + .bind(counter) + ", "
                    + .bind(window) + ", 1) ON CONFLICT (counter, window_start) DO UPDATE SET count = docket_rate_count.count + 1"
                    + " WHERE docket_rate_count.count < " + .bind(limit) + " RETURNING count"
            )
            guard let count = rows.first?.first.intValue else { return limit }
            return count - 1
        }
    }

    /// Removes the counters of windows that began before `window`.
    func prune(before window: Int) async throws {
        try await storage.writeUnordered { db in
            try await db.run("DELETE FROM docket_rate_count WHERE window_start < " + .bind(window))
        }
    }
}
