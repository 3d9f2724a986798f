/// The entry point of the SDK: one instance, one set of credentials, and the services that speak its APIs.
///
/// ```swift
/// let client = try DocketClient(instance: "http://127.0.0.1:8080",
///                               credentials: .basic(userName: "john.doe", password: "password"))
/// let groups = try await client.myWork.myTasks()
/// ```
public struct DocketClient: Sendable {
    /// The session every service sends through.
    public let session: DocketSession
    /// The Table API.
    public var table: TableService { TableService(session: session) }
    /// The My Work API and the journal.
    public var myWork: MyWorkService { MyWorkService(session: session) }

    /// Creates a client for an instance name (`acme`) or URL.
    public init(
        instance: String, credentials: Credentials, transport: any Transport = URLSessionTransport(),
        retryPolicy: DocketSession.RetryPolicy = .init()
    ) throws {
        session = DocketSession(
            instance: try Instance(instance), credentials: credentials, transport: transport, retryPolicy: retryPolicy
        )
    }

    /// Creates a client on an existing session.
    public init(session: DocketSession) { self.session = session }
}
