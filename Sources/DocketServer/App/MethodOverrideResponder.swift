import HTTPTypes
import Hummingbird

/// `X-HTTP-Method-Override` (ServiceNow's REST APIs honour it for clients that can only send GET and POST):
/// a POST to one of them (``ServiceNowAPI`` mounts this) carrying `PUT`, `PATCH` or `DELETE` in that header is
/// routed as that method.
struct MethodOverrideResponder<Inner: HTTPResponder>: HTTPResponder where Inner.Context == DocketRequestContext {
    typealias Context = DocketRequestContext

    let inner: Inner

    func respond(to request: Request, context: Context) async throws -> Response {
        guard request.method == .post, let value = request.headers[.xHTTPMethodOverride],
            let method = HTTPRequest.Method(value.uppercased()), [.put, .patch, .delete].contains(method)
        else { return try await inner.respond(to: request, context: context) }
        var head = request.head
        head.method = method
        head.headerFields[.xHTTPMethodOverride] = nil
        return try await inner.respond(to: Request(head: head, body: request.body), context: context)
    }
}

extension HTTPField.Name {
    static let xHTTPMethodOverride = Self("X-HTTP-Method-Override")!
}
