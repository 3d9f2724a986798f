import Crypto
import DocketModel
import Foundation
import HTTPTypes
import Hummingbird

/// AeroGear UnifiedPush Server's device registry and sender API under `/rest/`, so that apps built on AeroGear's push
/// SDKs (the DataSync showcase's `Push.instance.register`) register with docketd unchanged, and servers that send
/// through UPS can send through docketd:
///
/// - `POST /rest/registry/device` (Basic `variantId:variantSecret`): an installation (`deviceToken`, `deviceType`,
///   `operatingSystem`, `osVersion`, `alias`, `categories` as a list or a string, `platform`); `x-ag-old-token`
///   removes a previous token first. An iOS variant's token is APNs hex, an Android one an FCM token, a web one the
///   browser's subscription as base64 JSON. The `alias` and `categories` are what the sender API selects devices by;
///   they name an app or a group, never a person. A device receives a Docket user's own notifications only when its
///   registration proves that user: their bearer token in `X-Docket-Authorization` (an OAuth or OpenID access
///   token, as the app's other requests carry it) or their `JSESSIONID` session, checked through ``Identity``.
///   Variant credentials alone bind the device to nobody. Answers 200 with the installation.
/// - `DELETE /rest/registry/device/{token}` (204, 404), `PUT /rest/registry/device/pushMessage/{id}` (200 `{}`).
/// - `POST /rest/sender` (Basic `pushApplicationId:masterSecret`): `message` (`alert`, `sound`, `user-data`,
///   `apns.title`), `criteria` (`alias`, `categories`, `deviceType`, `variants`): queued for every matching device of
///   the application, 202 `{}`.
struct UPSAPI {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let subscriptions: PushSubscriptions
    let identity: Identity

    /// Installations of one variant bound to nobody that docketd keeps (its public credentials let anyone add them).
    static let maximumAnonymousInstallations = 100_000

    /// The header that carries the user's own credential beside the variant's (`Bearer <token>`).
    static let userAuthorization = HTTPField.Name("X-Docket-Authorization")!

    static let realm = #"Basic realm="AeroGear UnifiedPush Server""#
    /// Devices read at a time by a send.
    static let sendPage = 5000

    func mount() -> DialectMount {
        let router = Router(context: Context.self)
        router.add(middleware: UPSMiddleware())
        router.post("/rest/registry/device") { request, context in try await register(request, context: context) }
        router.delete("/rest/registry/device/:token") { request, context in try await unregister(request, context: context) }
        router.put("/rest/registry/device/pushMessage/:id") { request, _ in
            _ = try await variant(request)
            return Response.json(.object([:]))
        }
        router.on("/rest/registry/device", method: .options) { _, _ in Self.preflight() }
        router.on("/rest/registry/device/:token", method: .options) { _, _ in Self.preflight() }
        router.post("/rest/sender") { request, context in try await send(request, context: context) }
        return DialectMount(name: "ups", prefix: "/rest", responder: router.buildResponder()) { path in path == "/rest" || path.hasPrefix("/rest/") }
    }

    /// A UPS refusal: its status and message, as JSON.
    struct Failure: Error {
        let status: HTTPResponse.Status
        let message: String
    }

    static func preflight() -> Response {
        var response = Response(status: .noContent)
        response.headers[.accessControlAllowOrigin] = "*"
        response.headers[.accessControlAllowMethods] = "POST, DELETE, PUT"
        response.headers[.accessControlAllowHeaders] = "accept, origin, content-type, authorization, x-ag-old-token, x-docket-authorization"
        return response
    }

    typealias Variant = AppCredentials.PushVariant

    /// The variant of a request's Basic credentials, checked through ``Identity``; 401 with UPS's challenge otherwise.
    private func variant(_ request: Request) async throws -> Variant {
        guard let basic = request.headers.basic else { throw Failure(status: .unauthorized, message: "Unauthorized Request") }
        do {
            return try await identity.pushVariant(id: basic.username, secret: basic.password)
        } catch .unavailable, .busy {
            throw Failure(status: .serviceUnavailable, message: "The database is unavailable; try again shortly")
        } catch {
            throw Failure(status: .unauthorized, message: "Unauthorized Request")
        }
    }

    private func object(_ request: Request) async throws -> JSONValue {
        let bytes: ByteBuffer
        do { bytes = try await request.body.collect(upTo: 64 * 1024) } catch { throw Failure(status: .contentTooLarge, message: "The body is too large") }
        guard let json = try? JSONValue.parse(Array(bytes.readableBytesView)), json.objectValue != nil else {
            throw Failure(status: .badRequest, message: "The body must be a JSON object")
        }
        return json
    }

    /// A device token of a variant's platform, checked as UPS checks it; returns the kind it is delivered by and the
    /// token as stored (APNs hex in lower case), or the Web Push subscription it holds.
    static func device(_ token: String, platform: String) throws -> (kind: String, token: String, webPush: JSONValue?) {
        switch platform {
        case "ios":
            let hex = token.lowercased().filter { $0 != " " && $0 != "-" }
            guard hex.count >= 64, hex.count <= 200, hex.allSatisfy(\.isHexDigit) else {
                throw Failure(status: .badRequest, message: "Invalid iOS device token: 64 or more hexadecimal digits")
            }
            return ("apns", hex, nil)
        case "android":
            guard token.count >= 100, token.count <= 4096,
                token.unicodeScalars.allSatisfy({ CharacterSet.alphanumerics.contains($0) && $0.isASCII || "-_:".unicodeScalars.contains($0) })
            else { throw Failure(status: .badRequest, message: "Invalid Android device token") }
            return ("fcm", token, nil)
        default:
            guard token.count <= 8192, let data = Data(base64Encoded: token), let subscription = try? JSONValue.parse(Array(data)),
                subscription["endpoint"]?.stringValue != nil
            else { throw Failure(status: .badRequest, message: "Invalid Web Push device token: a base64 JSON subscription") }
            return ("webpush", token, subscription)
        }
    }

    @Sendable func register(_ request: Request, context: Context) async throws -> Response {
        let variant = try await variant(request)
        let body = try await object(request)
        guard let token = body["deviceToken"]?.stringValue, !token.isEmpty else {
            throw Failure(status: .badRequest, message: "deviceToken is required")
        }
        let device = try Self.device(token, platform: variant.platform)
        func text(_ name: String, _ limit: Int = 100) -> String { String((body[name]?.stringValue ?? "").prefix(limit)) }
        let categories: [String]
        switch body["categories"] {
        case .array(let items)?: categories = items.compactMap(\.stringValue)
        case .string(let text)?: categories = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        default: categories = []
        }
        let alias = text("alias", 255)
        // Whom the device is for is settled before anything changes: a registration refused changes nothing.
        let userID = try await user(proven: request)
        if userID.isEmpty, try await anonymousInstallations(of: variant) >= Self.maximumAnonymousInstallations {
            throw Failure(status: .forbidden, message: "This app has as many anonymous installations as docketd keeps; register with the user's token")
        }
        if let old = request.headers[HTTPField.Name("x-ag-old-token")!], !old.isEmpty, let previous = try? Self.device(old, platform: variant.platform) {
            try await removeInstallations(token: previous.token, variant: variant)
        }
        var values: [String: String] = [
            "kind": device.kind, "token": device.webPush == nil ? device.token : "", "variant": variant.sysID, "alias": alias,
            "categories": categories.filter { !$0.isEmpty }.joined(separator: ","), "device_type": text("deviceType"),
            "operating_system": text("operatingSystem"), "os_version": text("osVersion"), "user": userID, "active": "true",
            "name": text("deviceType").isEmpty ? variant.platform : text("deviceType"),
        ]
        if let subscription = device.webPush {
            let endpoint = subscription["endpoint"]?.stringValue ?? ""
            do {
                _ = try await subscriptions.endpoints.check(endpoint)
                _ = try WebPush.SubscriptionKeys(
                    p256dh: subscription["keys"]?["p256dh"]?.stringValue ?? "", auth: subscription["keys"]?["auth"]?.stringValue ?? ""
                )
            } catch {
                throw Failure(status: .badRequest, message: "The Web Push subscription cannot be used")
            }
            values["endpoint"] = endpoint
            values["p256dh"] = subscription["keys"]?["p256dh"]?.stringValue ?? ""
            values["auth"] = subscription["keys"]?["auth"]?.stringValue ?? ""
        }
        // One installation per token and variant: registering again updates it.
        let digest = SHA256.hash(data: Array((variant.sysID + "\u{0}" + device.token).utf8))
        let sysID = String(digest.map { String(format: "%02x", $0) }.joined().prefix(32))
        do {
            try await store.insert(into: "sys_push_subscription", values: values.merging(["sys_id": sysID]) { $1 }, caller: .system)
        } catch let error as EngineError where error.code == .badRequest {
            try await store.update(sysID, in: "sys_push_subscription", values: values, caller: .system)
        }
        return Response.json(JSONValue(members: [
            ("id", .string(sysID)), ("deviceToken", .string(token)), ("deviceType", .string(text("deviceType"))),
            ("operatingSystem", .string(text("operatingSystem"))), ("osVersion", .string(text("osVersion"))), ("alias", .string(alias)),
            ("categories", .array(categories.map { .string($0) })), ("platform", .string(text("platform"))), ("enabled", .bool(true)),
            ("variantID", .string(variant.variantID)),
        ]))
    }

    @Sendable func unregister(_ request: Request, context: Context) async throws -> Response {
        let variant = try await variant(request)
        let token = (try context.parameters.require("token")).removingPercentEncoding ?? ""
        guard let device = try? Self.device(token, platform: variant.platform),
            try await removeInstallations(token: device.token, variant: variant) > 0
        else { throw Failure(status: .notFound, message: "Could not find requested Installation") }
        return Response(status: .noContent)
    }

    private func anonymousInstallations(of variant: Variant) async throws -> Int {
        try await store.storage.read { db in
            try await db.integer(
                "SELECT COUNT(*) FROM sys_push_subscription WHERE variant = " + .bind(variant.sysID) + " AND ("
                    + .identifier("user") + " IS NULL OR " + .identifier("user") + " = '')"
            )
        }
    }

    @discardableResult
    private func removeInstallations(token: String, variant: Variant) async throws -> Int {
        let found = try await store.list(
            RecordQuery(
                table: "sys_push_subscription", query: PushSubscriptions.query([("variant", variant.sysID), ("token", token)]),
                fields: ["sys_id"], limit: 10, count: false
            ),
            caller: .system
        ).records
        for record in found {
            do { try await store.delete(record.sysID, from: "sys_push_subscription", caller: .system) } catch let error as EngineError where error.code == .notFound {}
        }
        return found.count
    }

    /// The Docket user a registration proves (their bearer token in ``userAuthorization``, else their session
    /// cookie), checked through ``Identity``; "" when it proves nobody. Credentials presented that do not hold are
    /// refused rather than taken as nobody's, so that an app learns its user's token has lapsed.
    private func user(proven request: Request) async throws -> String {
        do {
            if let header = request.headers[Self.userAuthorization] {
                let parts = header.split(separator: " ", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty, parts[1].utf8.count <= 8192 else {
                    throw Failure(status: .unauthorized, message: "X-Docket-Authorization must be Bearer and the user's token")
                }
                return try await identity.bearer(String(parts[1])).caller.userID
            }
            if let session = request.cookies[Identity.sessionCookieName]?.value, !session.isEmpty {
                return try await identity.session(session).userID
            }
            return ""
        } catch let refusal as Identity.Refusal {
            switch refusal {
            case .unavailable, .busy:
                throw Failure(status: .serviceUnavailable, message: "The user's credentials cannot be checked now; try again shortly")
            default:
                throw Failure(status: .unauthorized, message: "The user's credentials are not valid")
            }
        }
    }

    @Sendable func send(_ request: Request, context: Context) async throws -> Response {
        guard let basic = request.headers.basic else { throw Failure(status: .unauthorized, message: "Unauthorized Request") }
        let application: String
        do {
            application = try await identity.pushApplication(id: basic.username, masterSecret: basic.password)
        } catch .busy {
            throw Failure(status: .serviceUnavailable, message: "Too many requests are being checked; try again shortly")
        } catch .unavailable {
            throw Failure(status: .serviceUnavailable, message: "The database is unavailable; try again shortly")
        } catch {
            throw Failure(status: .unauthorized, message: "Unauthorized Request")
        }
        var body = try await object(request)
        // The legacy flat format: the message's fields at the top, the criteria beside them.
        if body["message"] == nil { body = JSONValue(members: [("message", body), ("criteria", body)]) }
        let message = body["message"] ?? .object([:])
        let criteria = body["criteria"] ?? .object([:])
        func list(_ name: String) -> [String]? {
            guard let value = criteria[name] else { return nil }
            if let items = value.arrayValue { return items.compactMap(\.stringValue) }
            return value.stringValue.map { [$0] }
        }
        let alert = message["alert"]?.stringValue ?? ""
        let title = message["apns"]?["title"]?.stringValue ?? (message["user-data"]?["title"]?.stringValue ?? "")
        guard !alert.isEmpty || !title.isEmpty else { throw Failure(status: .badRequest, message: "The message has no alert") }
        let variants = try await store.list(
            RecordQuery(
                table: "sys_push_variant", query: PushSubscriptions.query([("push_application", application), ("active", "true")]),
                fields: ["sys_id", "variant_id"], limit: 100, count: false
            ),
            caller: .system
        ).records.filter { variant in list("variants").map { $0.contains(variant["variant_id"]) } ?? true }
        var targets: [(subscription: String, user: String)] = []
        for variant in variants {
            // Every device of the variant, a page at a time (none left out, however many there are).
            var offset = 0
            while true {
                let devices = try await store.list(
                    RecordQuery(
                        table: "sys_push_subscription",
                        query: EncodedQuery(
                            all: [QueryCondition("variant", .equals, variant.sysID), QueryCondition("active", .equals, "true")],
                            orderBy: [OrderTerm("sys_id", descending: false)]
                        ),
                        fields: ["sys_id", "user", "alias", "categories", "device_type"], limit: Self.sendPage, offset: offset, count: false
                    ),
                    caller: .system
                ).records
                for device in devices {
                    if let aliases = list("alias"), !aliases.contains(device["alias"]) { continue }
                    if let wanted = list("categories"), Set(wanted).isDisjoint(with: device["categories"].split(separator: ",").map(String.init)) { continue }
                    if let types = list("deviceType"), !types.contains(device["device_type"]) { continue }
                    targets.append((device.sysID, device["user"]))
                }
                guard devices.count == Self.sendPage else { break }
                offset += Self.sendPage
            }
        }
        // One message per user (the devices of nobody's alias share one), each written with its deliveries in a
        // transaction of its own, so that a large send does not hold the write lock for all of them at once.
        let byUser = Dictionary(grouping: targets, by: \.user)
        let store = self.store
        for (user, devices) in byUser {
            let event = try await store.storage.write { db in
                try await Notifier.write(
                    ["user": user, "subject": String((title.isEmpty ? alert : title).prefix(255)), "message": String(alert.prefix(4000))],
                    to: .subscriptions(devices.map(\.subscription)), store: store, db: db
                )
            }
            store.notify(event)
        }
        return Response.json(.object([:]), status: .accepted)
    }

}

/// UPS's answers: refusals as `{"error": …}` JSON with its status (401 with UPS's Basic challenge), and CORS on
/// every answer, as UPS gives browsers.
struct UPSMiddleware: RouterMiddleware {
    typealias Context = DocketRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let failure as UPSAPI.Failure {
            response = Response.json(.object(["error": .string(failure.message)]), status: failure.status)
            if failure.status == .unauthorized { response.headers[.wwwAuthenticate] = UPSAPI.realm }
        } catch let error as HTTPError where error.status == .notFound || error.status == .methodNotAllowed {
            response = Response.json(.object(["error": .string("Not found")]), status: .notFound)
        } catch let error where StorageUnavailable.classify(error) != nil {
            response = Response.json(.object(["error": .string("The database is unavailable; try again shortly")]), status: .serviceUnavailable)
            response.headers[.retryAfter] = StorageUnavailable.retryAfter
        } catch let error as EngineError {
            response = Response.json(.object(["error": .string(error.message)]), status: error.code == .notFound ? .notFound : .badRequest)
        }
        response.headers[.accessControlAllowOrigin] = "*"
        return response
    }
}
