import HTTPTypes
import Hummingbird
import OrderedCollections
import Synchronization

/// Rendered pages of the Table API's lists, served again to the same caller asking for the same page while nothing
/// has changed since.
///
/// A page of 100 incidents with display values costs milliseconds of CPU to read and render, and the same few lists
/// (my open incidents, my group's queue) are asked for again and again by the people who work them. A page is kept
/// with the engine's change mark as it was just before the page was read (``RecordStore/changeMark()``: how many
/// committed changes this process has published, after catching up with other instances' commits), and served
/// again only while the mark is still there: every committed change is published, in this process or read from the
/// log of another instance, so an unchanged mark means the database holds what it held when the page was read. The
/// log's head is read for each request (one indexed read), so a database that does not answer is a 503 as for any
/// other request, and a change committed anywhere, a moment ago, is never missed. (A sequence number would not do on
/// PostgreSQL, where writes commit in any order: a smaller number may commit after a larger one was seen.)
///
/// That is coarse on purpose: any change ends every kept page, since what a page shows can come from many tables
/// (its references' targets, the tables its query joins, journal entries). A page is kept per caller (the user,
/// roles, time zone and domains: ``callerKey(_:)``), per request (path, query, base URL) and per schema generation,
/// and only when what it selects does not move with the clock (a query such as "opened today" compiles differently
/// tomorrow: ``RecordStore/listIsTimeless(_:query:caller:)``). Pages are forgotten oldest first beyond ``maxBytes``
/// (`--list-cache-mb`; 0 keeps none).
final class ListPages: Sendable {
    struct Page: Sendable {
        let body: ByteBuffer
        let headers: HTTPFields
        /// The change mark just before the page was read.
        let head: Int

        var response: Response { Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: body)) }
    }

    private struct State {
        var pages: OrderedDictionary<String, Page> = [:]
        var bytes = 0
        /// Pages being read now, by key: a request for the same page at the same head waits for that read.
        var reading: [String: (head: Int, task: Task<Read, any Error>)] = [:]
    }

    /// A page as read: kept for later when `keep` (it does not move with the clock).
    typealias Read = (page: Page, keep: Bool)

    private let state = Mutex(State())
    /// Where each answer is counted (kept, shared, read).
    let metrics: ServerMetrics?
    let maxBytes: Int
    /// A page larger than this is not kept (a 10,000-record export is read once).
    let maxPageBytes: Int

    init(maxBytes: Int, metrics: ServerMetrics? = nil) {
        self.metrics = metrics
        self.maxBytes = max(0, maxBytes)
        self.maxPageBytes = min(self.maxBytes / 8, 4 << 20)
    }

    var isEnabled: Bool { maxBytes > 0 }

    /// The page of `key` at event-log head `head`: the kept one, the one another request is reading at that head
    /// (after a change, the callers who ask at once cost one read, not one each), or one `read` now (and kept
    /// when it may be).
    func page(_ key: String, head: Int, read: @escaping @Sendable () async throws -> Read) async throws -> Page {
        enum Found {
            case kept(Page)
            case reading(Task<Read, any Error>, owned: Bool)
        }
        let found = state.withLock { state -> Found in
            if let kept = state.pages[key] {
                if kept.head == head { return .kept(kept) }
                state.pages.removeValue(forKey: key)
                state.bytes -= kept.body.readableBytes
            }
            if let reading = state.reading[key], reading.head == head { return .reading(reading.task, owned: false) }
            let task = Task { try await read() }
            state.reading[key] = (head, task)
            return .reading(task, owned: true)
        }
        switch found {
        case .kept(let page):
            metrics?.listPage("kept")
            return page
        case .reading(let task, owned: false):
            metrics?.listPage("shared")
            return try await task.value.page
        case .reading(let task, owned: true):
            metrics?.listPage("read")
            let result: Result<Read, any Error> = await task.result
            state.withLock { state in
                if state.reading[key]?.head == head { state.reading[key] = nil }
            }
            let read = try result.get()
            if read.keep { keep(read.page, as: key) }
            return read.page
        }
    }

    /// Keeps a page (forgetting the oldest beyond ``maxBytes``).
    func keep(_ page: Page, as key: String) {
        let size = page.body.readableBytes
        guard isEnabled, size <= maxPageBytes else { return }
        state.withLock { state in
            if let old = state.pages.removeValue(forKey: key) { state.bytes -= old.body.readableBytes }
            state.pages[key] = page
            state.bytes += size
            while state.bytes > maxBytes, !state.pages.isEmpty {
                state.bytes -= state.pages.removeFirst().value.body.readableBytes
            }
        }
    }

    /// Everything about the caller that can change what a page shows them. Every stored property of ``Caller`` but
    /// its display name (`ListPagesTests.callerKeyCoversCaller` fails when one is added and not named here).
    static func callerKey(_ caller: Caller) -> String {
        [
            caller.userID, caller.userName, caller.roles.sorted().joined(separator: ","), caller.timeZoneName,
            caller.domains.sorted().joined(separator: ","), caller.activeDomain ?? "",
        ].joined(separator: "\u{0}")
    }
}
