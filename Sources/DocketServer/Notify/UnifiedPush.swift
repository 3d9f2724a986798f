import AsyncHTTPClient
import DocketModel
import Foundation
import NIOCore

/// UnifiedPush's endpoint discovery: a push server answers `GET` on an endpoint with `{"unifiedpush":{"version":1}}`.
/// docketd asks before it stores one (the endpoint was checked by ``EndpointGuard`` first), so that a typing
/// mistake or an address that is not a push server is refused at registration, not found out at the first send.
enum UnifiedPush {
    static func isEndpoint(_ checked: EndpointGuard.Checked, http: PushHTTPClient) async -> Bool {
        var request = HTTPClientRequest(url: checked.url.absoluteString)
        request.method = .GET
        request.headers.add(name: "Accept", value: "application/json")
        do {
            let response = try await http.client(for: checked).execute(request, timeout: .seconds(5))
            let body = try await response.body.collect(upTo: 4096)
            guard response.status.code == 200 else { return false }
            return (try JSONValue.parse(Array(body.readableBytesView)))["unifiedpush"]?["version"]?.intValue == 1
        } catch {
            // No answer, an answer too long, not JSON: not an endpoint docketd can use.
            return false
        }
    }
}
