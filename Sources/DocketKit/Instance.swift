import Foundation

/// Where an instance lives. A bare name is a ServiceNow instance (`acme` → `https://acme.service-now.com`);
/// anything with a scheme or a dot is used as a URL (`http://127.0.0.1:8080`, `docket.example.com`).
///
/// ```swift
/// try Instance("acme").baseURL       // https://acme.service-now.com
/// try Instance("http://127.0.0.1:8080").baseURL
/// ```
public struct Instance: Sendable, Equatable, CustomStringConvertible {
    /// The base URL, without a trailing slash.
    public let baseURL: URL

    /// Parses an instance name or URL; throws ``DocketError`` for something that is neither.
    public init(_ text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        var candidate: String
        if trimmed.contains("://") {
            candidate = trimmed
        } else if trimmed.contains(".") || trimmed.contains(":") {
            candidate = "https://" + trimmed
        } else if !trimmed.isEmpty, trimmed.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) {
            candidate = "https://\(trimmed.lowercased()).service-now.com"
        } else {
            throw DocketError(kind: .invalidRequest, message: "'\(text)' is not an instance name or URL")
        }
        while candidate.hasSuffix("/") { candidate.removeLast() }
        guard let url = URL(string: candidate), let scheme = url.scheme, ["http", "https"].contains(scheme),
            url.host != nil
        else { throw DocketError(kind: .invalidRequest, message: "'\(text)' is not an instance name or URL") }
        baseURL = url
    }

    /// The URL for a path and query items.
    func url(_ path: String, query: [(String, String)] = []) -> URL {
        var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: false)!
        components.percentEncodedPath = components.percentEncodedPath + path
        if !query.isEmpty {
            components.percentEncodedQuery = query.map { Self.encode($0.0) + "=" + Self.encode($0.1) }
                .joined(separator: "&")
        }
        return components.url!
    }

    private static let allowed = CharacterSet(
        charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~,"
    )

    static func encode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    /// The base URL as text.
    public var description: String { baseURL.absoluteString }
}
