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

    private func json(_ method: String, _ path: String, body: Data? = nil) async throws -> JSONValue {
        guard case .eto = session.credentials else {
            throw DocketError(kind: .invalidRequest, message: "the ETO API needs an ETO login (Credentials.eto)")
        }
        let response = try await session.send(method, path, body: body)
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
