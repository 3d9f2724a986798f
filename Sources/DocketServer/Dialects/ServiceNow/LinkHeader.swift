import DocketModel
import Hummingbird
import HTTPTypes
/// Builds the `Link` header of a list response: first and last always, prev and next when they exist.
enum LinkHeader {
    static func value(
        baseURL: String, path: String, parameters: [(String, String)], limit: Int, offset: Int, total: Int
    ) -> String {
        let kept = parameters.filter { $0.0 != "sysparm_offset" && $0.0 != "sysparm_limit" }
        func url(_ offset: Int) -> String {
            let query = (kept + [("sysparm_limit", String(limit)), ("sysparm_offset", String(offset))])
                .map { FormQuery.encode($0.0) + "=" + FormQuery.encode($0.1) }.joined(separator: "&")
            return "<\(baseURL)\(path)?\(query)>"
        }
        let step = max(limit, 1)
        let last = total > 0 ? ((total - 1) / step) * step : 0
        var links = ["\(url(0));rel=\"first\""]
        if offset > 0 { links.append("\(url(max(0, offset - step)));rel=\"prev\"") }
        // `offset` comes from the request and may be as large as Int.max: compare without adding to it.
        if offset < total - step { links.append("\(url(offset + step));rel=\"next\"") }
        links.append("\(url(last));rel=\"last\"")
        return links.joined(separator: ",")
    }
}

extension TableParameters {
    /// `X-Total-Count` and `Link` for a list response, unless the request suppressed them.
    func pagingHeaders(total: Int, baseURL: String, path: String) -> HTTPFields {
        var headers: HTTPFields = [:]
        if !noCount { headers[.xTotalCount] = String(total) }
        if !suppressPaginationHeader, limit > 0 {
            headers[.link] = LinkHeader.value(
                baseURL: baseURL, path: path, parameters: all, limit: limit, offset: offset, total: total
            )
        }
        return headers
    }
}

/// A list response: `{"result":[…]}` with the paging headers.
enum ListResponse {
    static func make(
        _ records: [Record], total: Int?, parameters: TableParameters, baseURL: String, path: String,
        bytesPerRecord: Int, write: (Record, inout JSONWriter) -> Void
    ) -> Response {
        let (body, headers) = parts(
            records, total: total, parameters: parameters, baseURL: baseURL, path: path, bytesPerRecord: bytesPerRecord, write: write
        )
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: body))
    }

    /// The answer's body and header fields (``ListPages`` keeps them).
    static func parts(
        _ records: [Record], total: Int?, parameters: TableParameters, baseURL: String, path: String,
        bytesPerRecord: Int, write: (Record, inout JSONWriter) -> Void
    ) -> (body: ByteBuffer, headers: HTTPFields) {
        var writer = JSONWriter(capacity: bytesPerRecord * max(1, records.count))
        writer.beginObject()
        writer.key("result")
        writer.beginArray()
        for record in records { write(record, &writer) }
        writer.endArray()
        writer.endObject()
        var headers: HTTPFields = [.contentType: "application/json;charset=UTF-8"]
        headers.append(contentsOf: parameters.pagingHeaders(total: total ?? 0, baseURL: baseURL, path: path))
        return (ByteBuffer(bytes: writer.bytes), headers)
    }
}
