import HTTPTypes
import Crypto
import Foundation
import Hummingbird
import Mustache
import NIOCore

/// The web UI's files: the swift-mustache templates and the static assets (style sheet, script, icon), read once
/// at start from the `WebResources` folder that ships as the DocketServer target's resource bundle.
///
/// A build puts the bundle (`Docket_DocketServer.resources` on Linux, `Docket_DocketServer.bundle` on Apple
/// platforms) next to the binary; a release build copied elsewhere takes it along, or names the folder in
/// `DOCKET_WEB_RESOURCES`. In a source checkout the folder in the sources is the last resort.
struct WebUI: Sendable {
    struct Asset: Sendable {
        let bytes: ByteBuffer
        let contentType: String
        let etag: String
    }

    let library: MustacheLibrary
    let assets: [String: Asset]
    /// A digest of every asset: pages name assets with it (`app.css?v=…`), so they can be cached for long.
    let version: String

    /// Where the files were found, for the log.
    let directory: URL

    static let bundleName = "Docket_DocketServer"

    /// The folders searched for the web files, in order.
    static func candidates(environment: [String: String] = ProcessInfo.processInfo.environment) -> [URL] {
        var folders: [URL] = []
        if let named = environment["DOCKET_WEB_RESOURCES"], !named.isEmpty { folders.append(URL(fileURLWithPath: named)) }
        if let binary = Bundle.main.executableURL?.resolvingSymlinksInPath().deletingLastPathComponent() {
            folders.append(binary.appendingPathComponent("\(bundleName).resources/WebResources"))
            folders.append(binary.appendingPathComponent("\(bundleName).bundle/Contents/Resources/WebResources"))
            folders.append(binary.appendingPathComponent("\(bundleName).bundle/WebResources"))
        }
        // A source checkout: Sources/DocketServer/WebResources.
        folders.append(
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("WebResources")
        )
        return folders
    }

    /// Loads the templates and assets from the first folder that has them; nil when none does.
    static func load() async throws -> WebUI? {
        for folder in candidates() {
            let templates = folder.appendingPathComponent("templates")
            guard FileManager.default.fileExists(atPath: templates.appendingPathComponent("work.mustache").path) else { continue }
            let library = try await MustacheLibrary(directory: templates.path)
            var assets: [String: Asset] = [:]
            var digest = SHA256()
            let assetFolder = folder.appendingPathComponent("assets")
            for name in try FileManager.default.contentsOfDirectory(atPath: assetFolder.path).sorted() {
                let data = try Data(contentsOf: assetFolder.appendingPathComponent(name))
                digest.update(data: data)
                let hash = SHA256.hash(data: data).prefix(12).map { String(format: "%02x", $0) }.joined()
                assets[name] = Asset(bytes: ByteBuffer(bytes: data), contentType: contentType(of: name), etag: "\"\(hash)\"")
            }
            let version = digest.finalize().prefix(6).map { String(format: "%02x", $0) }.joined()
            return WebUI(library: library, assets: assets, version: version, directory: folder)
        }
        return nil
    }

    static func contentType(of name: String) -> String {
        switch name.split(separator: ".").last.map(String.init) ?? "" {
        case "css": return "text/css; charset=utf-8"
        case "js": return "text/javascript; charset=utf-8"
        case "svg": return "image/svg+xml"
        case "webmanifest": return "application/manifest+json"
        case "png": return "image/png"
        default: return "application/octet-stream"
        }
    }

    /// A page: the template rendered with `values`, which the layout's common values (asset version) join.
    func page(_ template: String, _ values: [String: Any], status: HTTPResponse.Status = .ok) -> Response {
        var values = values
        values["assetVersion"] = version
        let html = library.render(values, withTemplate: template) ?? "<!doctype html><title>Docket</title><p>Page \(template) is missing.</p>"
        return Self.html(html, status: status)
    }

    static func html(_ html: String, status: HTTPResponse.Status = .ok) -> Response {
        var response = Response(status: status, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: html)))
        securityHeaders(&response.headers)
        response.headers[.cacheControl] = "no-store"
        return response
    }

    /// Headers on every web answer: no framing, no sniffing, and a policy that allows only docketd's own files
    /// (the pages have no inline script or style).
    static func securityHeaders(_ headers: inout HTTPFields) {
        headers[.contentSecurityPolicy] = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        headers[.xContentTypeOptions] = "nosniff"
        headers[.xFrameOptions] = "DENY"
        headers[.referrerPolicy] = "same-origin"
    }

    /// `GET /app/assets/NAME`: the file with a validator; a versioned URL (`?v=`) may be cached for a year.
    func asset(_ request: Request, name: String) throws -> Response {
        guard let asset = assets[name] else { throw WebError(.notFound, "There is no such file.") }
        var headers: HTTPFields = [.contentType: asset.contentType, .eTag: asset.etag]
        headers[.cacheControl] = request.uri.queryParameters["v"] != nil ? "public, max-age=31536000, immutable" : "public, max-age=3600"
        headers[.xContentTypeOptions] = "nosniff"
        if let match = request.headers[.ifNoneMatch], match.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == asset.etag }) {
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: asset.bytes))
    }
}

extension HTTPField.Name {
    static let xFrameOptions = Self("X-Frame-Options")!
    static let referrerPolicy = Self("Referrer-Policy")!
}
