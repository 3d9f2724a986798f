import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore

@testable import DocketServer

/// A browser for router tests of the web UI: keeps cookies, reads the CSRF token from pages, follows nothing.
struct WebBrowser {
    let client: any TestClientProtocol
    var cookies: [String: String] = [:]
    /// The CSRF token of the last page that carried one.
    var csrf = ""

    init(_ client: any TestClientProtocol) { self.client = client }

    var cookieHeader: HTTPFields {
        cookies.isEmpty ? [:] : [.cookie: cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")]
    }

    /// The `Set-Cookie` headers of a response, by name (the whole header, attributes included).
    static func setCookies(_ response: TestResponse) -> [String: String] {
        var result: [String: String] = [:]
        for header in response.headers[values: .setCookie] {
            let name = String(header.prefix { $0 != "=" })
            result[name] = header
        }
        return result
    }

    private mutating func keep(_ response: TestResponse) {
        for (name, header) in Self.setCookies(response) {
            let value = header.dropFirst(name.count + 1).prefix { $0 != ";" }
            if value.isEmpty || header.contains("Max-Age=0") { cookies[name] = nil } else { cookies[name] = String(value) }
        }
        let text = String(buffer: response.body)
        if let range = text.range(of: #"name="csrf" value=""#) {
            csrf = String(text[range.upperBound...].prefix { $0 != "\"" })
        }
    }

    @discardableResult
    mutating func get(_ uri: String, headers: HTTPFields = [:]) async throws -> TestResponse {
        var fields = cookieHeader
        for field in headers { fields.append(field) }
        let response = try await client.execute(uri: uri, method: .get, headers: fields, body: nil)
        keep(response)
        return response
    }

    /// Posts a form with the current CSRF token (unless `csrf` gives another, or "" for none).
    @discardableResult
    mutating func post(_ uri: String, _ fields: [(String, String)], csrf: String? = nil) async throws -> TestResponse {
        let token = csrf ?? self.csrf
        let pairs = (token.isEmpty ? [] : [("csrf", token)]) + fields
        let body = pairs.map { Self.escape($0.0) + "=" + Self.escape($0.1) }.joined(separator: "&")
        var headers = cookieHeader
        headers[.contentType] = "application/x-www-form-urlencoded"
        let response = try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: body))
        keep(response)
        return response
    }

    /// Posts a multipart form with one file.
    @discardableResult
    mutating func upload(_ uri: String, fileName: String, contents: String, csrf: String? = nil) async throws -> TestResponse {
        let boundary = "----docket-test-boundary"
        var body = ""
        body += "--\(boundary)\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n\(csrf ?? self.csrf)\r\n"
        body += "--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"\(fileName)\"\r\nContent-Type: text/plain\r\n\r\n\(contents)\r\n"
        body += "--\(boundary)--\r\n"
        var headers = cookieHeader
        headers[.contentType] = "multipart/form-data; boundary=\(boundary)"
        let response = try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: body))
        keep(response)
        return response
    }

    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? ""
    }

    /// Signs in through the sign-in page; the response of the form's POST.
    @discardableResult
    mutating func signIn(_ user: String = "john.doe", _ password: String = "password") async throws -> TestResponse {
        try await get("/")
        return try await post("/app/login", [("user_name", user), ("password", password), ("next", "/app/work")], csrf: cookies[WebSessions.loginCookie] ?? "")
    }
}

extension TestResponse {
    var location: String { headers[.location] ?? "" }
}
