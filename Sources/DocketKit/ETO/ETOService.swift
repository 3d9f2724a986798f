import DocketModel
import Foundation

/// An ETO enterprise (a tenant).
public struct ETOEnterprise: Sendable, Equatable {
    /// Its GUID.
    public var id: String
    public var name: String
}

/// An ETO site or program: its number and name.
public struct ETOChoice: Sendable, Equatable {
    public var id: Int
    public var name: String
    /// Programs only: a disabled program is listed but cannot be chosen.
    public var disabled: Bool
}

/// A participant (ETO's `Actor.svc`).
public struct ETOParticipant: Sendable, Equatable {
    /// The participant id (CLID).
    public var id: Int
    public var firstName: String
    public var lastName: String
    /// `yyyy-MM-dd`, or nil.
    public var dateOfBirth: String?
    /// What TouchPoint responses point at.
    public var subjectID: Int
    public var siteID: Int
}

/// A TouchPoint element: a question of a form.
public struct ETOElement: Sendable, Equatable {
    public var id: Int
    /// 4 single choice, 5 text or number, 9 date.
    public var type: Int
    public var stimulus: String
    public var isRequired: Bool
    /// (TouchPointElementChoiceID, text) for choice elements.
    public var choices: [ETOChoice]
}

/// A TouchPoint (a form) with its elements.
public struct ETOTouchPoint: Sendable, Equatable {
    public var id: Int
    public var name: String
    public var elements: [ETOElement]
}

/// ETO's (Efforts to Outcomes) context chain, as typed calls: sign in with an e-mail address, choose an enterprise and
/// a site (which gives the site's security token), then a program. The session keeps the choices
/// (``DocketSession/etoLogin``) so that they can be saved and used again without the password.
///
/// A call made before its step fails with a ``DocketError`` whose message starts with the seed app's own name for
/// what is missing: `NoSSOAuthToken`, `NoEnterpriseIDSelected`, `NoSiteIDSelected`, `NoProgramIDSelected`.
///
/// ```swift
/// let client = try DocketClient(instance: "http://127.0.0.1:8080", credentials: .eto(ETOLogin(email: "john.doe@example.com")))
/// try await client.eto.signIn(email: "john.doe@example.com", password: "password")
/// let enterprise = try await client.eto.enterprises()[0]
/// let site = try await client.eto.sites(enterprise: enterprise.id)[0]
/// try await client.eto.selectSite(site.id, enterprise: enterprise.id)
/// try await client.eto.selectProgram(try await client.eto.programs().first { !$0.disabled }!.id)
/// ```
public struct ETOService: Sendable {
    let session: DocketSession

    static let zeroGUID = "00000000-0000-0000-0000-000000000000"

    /// The context as it stands.
    public var context: ETOLogin {
        get async { await session.etoLogin ?? ETOLogin(email: session.credentials.userName) }
    }

    /// Signs in (`SSOAuthenticate`); a wrong e-mail or password is a ``DocketError`` with status 401, too many
    /// failures one with status 429. Forgets any earlier choice of enterprise, site and program.
    public func signIn(email: String, password: String) async throws {
        let body = JSONValue(members: [
            ("security", JSONValue(members: [("Email", .string(email)), ("Password", .string(password))])),
        ])
        let answer = try await json("POST", "/API/Security.svc/SSOAuthenticate/", body: Data(body.serialized()))
        let result = answer["SSOAuthenticateResult"]
        guard let token = result?["SSOAuthToken"]?.stringValue, token != Self.zeroGUID, !token.isEmpty else {
            let code = result?["AuthStatusCode"]?.intValue ?? 1
            throw DocketError(
                kind: .http, status: code == 2 ? 429 : 401,
                message: code == 2 ? "too many failed sign-ins: wait a while" : "wrong e-mail address or password",
                request: "POST /API/Security.svc/SSOAuthenticate/"
            )
        }
        await session.setETO(ETOLogin(email: email, ssoToken: token))
    }

    /// The enterprises where the user is staff.
    public func enterprises() async throws -> [ETOEnterprise] {
        let token = try await ssoToken()
        return try await json("GET", "/API/Security.svc/GetSSOEnterprises/" + Instance.encode(token)).arrayValue?.compactMap {
            guard let id = $0["Key"]?.stringValue, let name = $0["Value"]?.stringValue else { return nil }
            return ETOEnterprise(id: id, name: name)
        } ?? []
    }

    /// The user's sites in an enterprise.
    public func sites(enterprise: String) async throws -> [ETOChoice] {
        let token = try await ssoToken()
        let path = "/API/Security.svc/GetSSOSites/" + Instance.encode(token) + "/" + Instance.encode(enterprise)
        return try await json("GET", path).arrayValue?.compactMap {
            guard let id = $0["Key"]?.intValue, let name = $0["Value"]?.stringValue else { return nil }
            return ETOChoice(id: id, name: name, disabled: false)
        } ?? []
    }

    /// Signs in to a site of an enterprise (`SSOSiteLogin`); forgets the program chosen before.
    public func selectSite(
        _ site: Int, enterprise: String, utcOffsetMinutes: Int = TimeZone.current.secondsFromGMT() / 60
    ) async throws {
        var login = await context
        let token = try await ssoToken()
        let path = "/API/Security.svc/SSOSiteLogin/\(site)/" + Instance.encode(enterprise) + "/" + Instance.encode(token)
            + "/\(utcOffsetMinutes)"
        guard let siteToken = try await json("GET", path).stringValue, !siteToken.isEmpty else {
            throw DocketError(kind: .decoding, message: "unexpected response from the instance", detail: "no site token")
        }
        login.enterprise = enterprise
        login.site = site
        login.siteToken = siteToken
        login.program = nil
        await session.setETO(login)
    }

    /// The programs of the chosen site, disabled ones flagged.
    public func programs() async throws -> [ETOChoice] {
        let site = try await selectedSite()
        return try await json("GET", "/API/Form.svc/Forms/Program/GetPrograms/\(site)").arrayValue?.compactMap {
            guard let id = $0["ID"]?.intValue, let name = $0["Name"]?.stringValue else { return nil }
            return ETOChoice(id: id, name: name, disabled: $0["Disabled"] == .bool(true))
        } ?? []
    }

    /// Chooses the program later calls work in (`UpdateCurrentProgram`).
    public func selectProgram(_ program: Int) async throws {
        _ = try await selectedSite()
        let body = JSONValue(members: [("ProgramID", .string(String(program)))])
        _ = try await json("POST", "/API/Security.svc/UpdateCurrentProgram/", body: Data(body.serialized()))
        var login = await context
        login.program = program
        await session.setETO(login)
    }

    /// The chosen program, or a `NoProgramIDSelected` error.
    public func selectedProgram() async throws -> Int {
        _ = try await selectedSite()
        guard let program = await context.program else {
            throw DocketError(kind: .invalidRequest, message: "NoProgramIDSelected: choose a program first")
        }
        return program
    }

    // MARK: Participants and TouchPoints

    /// Participants enrolled in the chosen program whose first or last name contains `term`.
    public func searchParticipants(_ term: String) async throws -> [ETOParticipant] {
        let program = try await selectedProgram()
        return try await json("GET", "/API/Search.svc/Search/\(program)/" + Instance.encode(term)).arrayValue?.compactMap(Self.participant) ?? []
    }

    /// A participant of the chosen site by id (CLID).
    public func participant(_ id: Int) async throws -> ETOParticipant {
        _ = try await selectedSite()
        guard let participant = Self.participant(try await json("GET", "/API/Actor.svc/participant/\(id)")) else {
            throw DocketError(kind: .decoding, message: "unexpected response from the instance", detail: "not a participant")
        }
        return participant
    }

    /// The enterprise's TouchPoints, with their elements.
    public func touchPoints() async throws -> [ETOTouchPoint] {
        _ = try await selectedSite()
        let listed = try await json("GET", "/API/TouchPoint.svc/ListTouchPoint").arrayValue ?? []
        var forms: [ETOTouchPoint] = []
        for item in listed {
            guard let id = item["TouchPointID"]?.intValue else { continue }
            forms.append(try await touchPoint(id))
        }
        return forms
    }

    /// One TouchPoint with its elements and choices.
    public func touchPoint(_ id: Int) async throws -> ETOTouchPoint {
        _ = try await selectedSite()
        let form = try await json("GET", "/API/TouchPoint.svc/GetTouchPoint", query: [("TouchPointID", String(id)), ("PopulateElementCollection", "true")])
        let elements = (form["ElementCollection"]?.arrayValue ?? []).compactMap { item -> ETOElement? in
            guard let id = item["ElementID"]?.intValue, let type = item["ElementType"]?.intValue else { return nil }
            let choices = (item["ElementChoices"]?.arrayValue ?? []).compactMap { choice -> ETOChoice? in
                guard let id = choice["TouchPointElementChoiceID"]?.intValue else { return nil }
                return ETOChoice(id: id, name: choice["ChoiceText"]?.stringValue ?? "", disabled: false)
            }
            return ETOElement(
                id: id, type: type, stimulus: item["Stimulus"]?.stringValue ?? "", isRequired: item["IsRequired"] == .bool(true),
                choices: choices
            )
        }
        return ETOTouchPoint(id: form["TouchPointID"]?.intValue ?? id, name: form["TouchPointName"]?.stringValue ?? "", elements: elements)
    }

    /// Records a response to a TouchPoint about a participant, in the chosen program. `answers` maps element ids to
    /// values: text for text elements, `MM/dd/yyyy` for dates, the choice's text or id for choice elements. Returns
    /// the new response's id.
    public func addResponse(to touchPoint: ETOTouchPoint, participant: ETOParticipant, answers: [Int: String]) async throws -> Int {
        let program = try await selectedProgram()
        var elements: [JSONValue] = []
        for (id, value) in answers.sorted(by: { $0.key < $1.key }) {
            guard let element = touchPoint.elements.first(where: { $0.id == id }) else {
                throw DocketError(kind: .invalidRequest, message: "\(touchPoint.name) has no element \(id)")
            }
            var members: [(String, JSONValue)] = [("ElementID", .integer(id)), ("ElementType", .integer(element.type))]
            if element.type == 4 {
                guard let choice = element.choices.first(where: { $0.name.caseInsensitiveCompare(value) == .orderedSame || String($0.id) == value }) else {
                    throw DocketError(
                        kind: .invalidRequest,
                        message: "'\(value)' is not a choice of \(element.stimulus): " + element.choices.map(\.name).joined(separator: ", ")
                    )
                }
                members.append(("ResponseElementChoices", .array([JSONValue(members: [("TouchPointElementChoiceID", .integer(choice.id))])])))
            } else {
                members.append(("Value", .string(value)))
            }
            elements.append(JSONValue(members: members))
        }
        let body = JSONValue(members: [("TouchPointResponse", JSONValue(members: [
            ("TouchPointID", .integer(touchPoint.id)), ("SubjectID", .integer(participant.subjectID)), ("ProgramID", .integer(program)),
            ("ResponseCreatedDate", .string("/Date(\(Int(Date().timeIntervalSince1970 * 1000)))/")), ("ResponseElements", .array(elements)),
        ]))])
        let answer = try await json("POST", "/API/TouchPoint.svc/TouchPointResponseAdd/", body: Data(body.serialized()))
        guard let id = answer["AddTouchPointResponseResult"]?["TouchPointResponseID"]?.intValue else {
            throw DocketError(kind: .decoding, message: "unexpected response from the instance", detail: "no TouchPointResponseID")
        }
        return id
    }

    /// Adds a participant to the chosen site, or with `id` changes one of its participants. `fields` take ETO's names
    /// (`FirstName`, `LastName`, `DateOfBirth` as `MM/dd/yyyy` or `yyyy-MM-dd`, `Address1`, `ZipCode`).
    public func saveParticipant(id: Int? = nil, fields: [(String, String)]) async throws -> ETOParticipant {
        let site = try await selectedSite()
        let known = ["FirstName", "LastName", "DateOfBirth", "Address1", "ZipCode"]
        var members: [(String, JSONValue)] = [("SiteID", .integer(site))]
        if let id { members.append(("ID", .integer(id))) }
        for (name, value) in fields {
            guard let key = known.first(where: { $0.caseInsensitiveCompare(name) == .orderedSame }) else {
                throw DocketError(kind: .invalidRequest, message: "a participant has no field \(name); its fields: " + known.joined(separator: ", "))
            }
            members.append((key, .string(value)))
        }
        let body = JSONValue(members: [("participant", JSONValue(members: members))])
        guard let saved = Self.participant(try await json("POST", "/API/Actor.svc/participant/", body: Data(body.serialized()))) else {
            throw DocketError(kind: .decoding, message: "unexpected response from the instance", detail: "not a participant")
        }
        return saved
    }

    static func participant(_ json: JSONValue) -> ETOParticipant? {
        guard let id = json["ID"]?.intValue else { return nil }
        var born: String? = nil
        if let text = json["DateOfBirth"]?.stringValue, text.hasPrefix("/Date("),
            let ms = Int(text.dropFirst(6).prefix { $0.isNumber || $0 == "-" })
        {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyy-MM-dd"
            born = formatter.string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
        }
        return ETOParticipant(
            id: id, firstName: json["FirstName"]?.stringValue ?? "", lastName: json["LastName"]?.stringValue ?? "", dateOfBirth: born,
            subjectID: json["SubjectID"]?.intValue ?? 0, siteID: json["SiteID"]?.intValue ?? 0
        )
    }

    // MARK: Helpers

    private func ssoToken() async throws -> String {
        let token = await context.ssoToken
        guard !token.isEmpty else { throw DocketError(kind: .invalidRequest, message: "NoSSOAuthToken: sign in first") }
        return token
    }

    private func selectedSite() async throws -> Int {
        _ = try await ssoToken()
        let login = await context
        guard login.enterprise != nil else {
            throw DocketError(kind: .invalidRequest, message: "NoEnterpriseIDSelected: choose an enterprise and a site first")
        }
        guard let site = login.site, login.siteToken != nil else {
            throw DocketError(kind: .invalidRequest, message: "NoSiteIDSelected: choose a site first")
        }
        return site
    }

    private func json(_ method: String, _ path: String, query: [(String, String)] = [], body: Data? = nil) async throws -> JSONValue {
        guard case .eto = session.credentials else {
            throw DocketError(kind: .invalidRequest, message: "the ETO API needs an ETO login (Credentials.eto)")
        }
        let response = try await session.send(method, path, query: query, body: body)
        do {
            return try JSONValue.parse(response.body)
        } catch {
            throw DocketError(kind: .decoding, message: "unexpected response from the instance", detail: "\(error)", underlying: error)
        }
    }
}

extension DocketClient {
    /// The ETO API (needs an ETO login).
    public var eto: ETOService { ETOService(session: session) }
}
