/// The ServiceNow REST error envelope:
/// `{"error":{"message":"…","detail":"…"},"status":"failure"}`.
public struct ServiceNowErrorBody: Codable, Sendable, Equatable {
    /// The message and detail.
    public struct Payload: Codable, Sendable, Equatable {
        /// A short message, such as `No Record found`.
        public var message: String
        /// A longer explanation, or nil.
        public var detail: String?

        /// Creates a payload.
        public init(message: String, detail: String?) {
            self.message = message
            self.detail = detail
        }
    }

    /// The error.
    public var error: Payload
    /// Always `failure`.
    public var status: String

    /// Creates an envelope.
    public init(message: String, detail: String?) {
        self.error = Payload(message: message, detail: detail)
        self.status = "failure"
    }
}
