import DocketModel
import Foundation
import Logging
import Synchronization

/// The record engine: every read goes through ``QueryCompiler`` and every write through one path that
/// checks access, fills defaults and numbers, applies business rules, writes the row and its journal
/// entries and appends to the event log, in one transaction.
final class RecordStore: Sendable {
    let storage: any Storage
    let policy: AccessPolicy
    let logger: Logger
    private let catalogBox: Mutex<(catalog: SchemaCatalog, generation: Int)>
    private let hashPassword: @Sendable (String) async -> String
    let cache = RecordCache()
    /// Where committed changes go after commit, for followers of the event log (``subscribe(after:batchSize:)``).
    let broadcaster = EventBroadcaster()
    /// How far other processes' changes have been published here (``SharedChanges``).
    let shared = SharedChanges()
    /// Judgements of events shared by live followers who see alike (``LiveJudgements``).
    let judgements = LiveJudgements(capacity: 20_000)
    /// The live queries followed now, judged together (see ``LiveRegistry``).
    let liveRegistry = LiveRegistry()
    /// Views compiled for judging (see ``RecordStore/compiledView(_:for:key:)``).
    let compiledViews = CompiledViews()
    /// Who sees alike (see ``VisibilityKeys``).
    let visibilityKeys = VisibilityKeys()
    /// The business rules run in the write path, cached (``BusinessRules``).
    let businessRules = BusinessRules()
    /// The system properties the engine obeys, cached (``InstanceProperties``).
    let properties = InstanceProperties()
    /// Numbered tables whose PostgreSQL sequence is known to exist (``ensureNumberSequence(for:)``).
    let numberSequences = Mutex<Set<String>>([])
    /// The columns of SELECTs that name no dot-walk, compiled once (``selectPlan(_:query:fields:caller:dialect:)``).
    let projections = ProjectionCache()
    /// The most events one follower of the log may replay: one that starts further behind is told to resync
    /// (``EventLogError/resyncNeeded(oldestAvailable:)``) instead of costing a replay without bound.
    let replayLimit: Int

    /// The current schema.
    var catalog: SchemaCatalog { catalogBox.withLock { $0.catalog } }

    /// The current schema and how many times it was reloaded (for what is built from it, like GraphQL schemas).
    var versionedCatalog: (catalog: SchemaCatalog, generation: Int) { catalogBox.withLock { ($0.catalog, $0.generation) } }

    init(
        storage: any Storage, catalog: SchemaCatalog, policy: AccessPolicy = .standard, logger: Logger,
        replayLimit: Int = RecordStore.defaultReplayLimit, hashPassword: @escaping @Sendable (String) async -> String
    ) {
        self.replayLimit = max(0, replayLimit)
        self.storage = storage
        self.catalogBox = Mutex((catalog, 0))
        self.policy = policy
        self.logger = logger
        self.hashPassword = hashPassword
        broadcaster.add(observer: cache)
        broadcaster.add(observer: businessRules)
        broadcaster.add(observer: properties)
    }

    /// Opens the engine on a storage: creates the schema on a new database, then loads the catalog.
    /// `lockWait`: how long to wait for another process holding the database's write lock
    /// (``SchemaStore/prepare(_:now:lockWait:logger:)``): minutes for a server's start, none for a command.
    static func open(
        storage: any Storage, policy: AccessPolicy = .standard, logger: Logger, replayLimit: Int = RecordStore.defaultReplayLimit,
        lockWait: Duration = .zero, hashPassword: @escaping @Sendable (String) async -> String
    ) async throws -> (store: RecordStore, isNew: Bool) {
        let isNew = try await SchemaStore.prepare(storage, lockWait: lockWait, logger: logger)
        let catalog = try await SchemaStore.loadCatalog(storage)
        let store = RecordStore(
            storage: storage, catalog: catalog, policy: policy, logger: logger, replayLimit: replayLimit, hashPassword: hashPassword
        )
        if storage.isShared { store.shared.start(at: try await store.latestSequence()) }
        return (store, isNew)
    }

    /// ``replayLimit`` unless configured (`--live-replay-max-events`).
    static let defaultReplayLimit = 50_000

    func table(_ name: String) throws(EngineError) -> SchemaCatalog.Table {
        guard let table = catalog.table(name) else { throw .invalidTable(name) }
        return table
    }

    func compiler(for table: SchemaCatalog.Table, caller: Caller, dialect: StorageDialect) -> QueryCompiler {
        QueryCompiler(catalog: catalog, policy: policy, dialect: dialect, caller: caller, table: table)
    }

    /// Called after every commit: publishes the event to the cache observers and followers of the log.
    func notify(_ event: ChangeEvent) {
        broadcaster.publish(event)
        shared.published(event.sequence)
    }

    func hash(_ password: String) async -> String { await hashPassword(password) }

    /// Reloads the catalog after a schema change (a table or field added through `sys_db_object` or
    /// `sys_dictionary`); cached records are dropped because they lack the new fields.
    func reloadCatalog() async throws {
        let catalog = try await SchemaStore.loadCatalog(storage)
        catalogBox.withLock { $0 = (catalog, $0.generation + 1) }
        cache.removeAll()
        projections.removeAll()
    }

    /// Reads the catalog again after a committed write changed the schema. The write is done whatever happens
    /// here, and its observers are told of it: a failed read never turns it into an error. It is tried again in
    /// the background until it succeeds or the storage is closed (the catalog lags meanwhile, which is logged).
    func reloadCatalogAfterCommit() async {
        do {
            try await reloadCatalog()
        } catch {
            logger.error("The schema changed but could not be read again; retrying", metadata: ["error": "\(error)"])
            Task { [self] in
                var delay = Duration.milliseconds(500)
                while true {
                    try? await Task.sleep(for: delay)
                    do {
                        try await reloadCatalog()
                        logger.notice("The changed schema was read again")
                        return
                    } catch let error as StorageUnavailable where error.reason == StorageUnavailable.closed.reason {
                        // The storage was closed (docketd is stopping): there is nothing left to bring up to date.
                        return
                    } catch {
                        delay = min(delay * 2, .seconds(10))
                    }
                }
            }
        }
    }
}
