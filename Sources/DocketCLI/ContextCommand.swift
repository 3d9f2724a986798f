import ArgumentParser
import DocketKit
import DocketModel
import Foundation

struct ContextCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "context",
        abstract: "Show or choose where you work in ETO: enterprise, site and program.",
        discussion: """
            Without options: the context chosen so far, and the choices at the next step (enterprises, then sites, \
            then programs; disabled programs are listed and marked). --enterprise (its name or GUID) with --site \
            (its name or SiteID) signs in to that site; --program (its name or ProgramID) then chooses the program. \
            The choices are kept for later runs, with the tokens and never the password.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "Enterprise name or GUID (with --site).")
    var enterprise: String?

    @Option(help: "Site name or SiteID.")
    var site: String?

    @Option(help: "Program name or ProgramID.")
    var program: String?

    @OptionGroup var output: OutputOptions

    func validate() throws {
        if enterprise != nil, site == nil { throw ValidationError("--enterprise needs --site") }
    }

    func run() async throws {
        let client = try connection.client()
        guard case .eto = client.session.credentials else {
            throw CLIFailure("'docket context' is for ETO logins: sign in with 'docket login URL --user EMAIL --eto'")
        }
        let eto = client.eto
        if let site {
            let enterprises = try await eto.enterprises()
            let chosen: ETOEnterprise
            if let enterprise {
                guard let match = enterprises.first(where: { Self.matches(enterprise, id: $0.id, name: $0.name) }) else {
                    throw CLIFailure("no enterprise '\(enterprise)' of yours; yours: " + enterprises.map(\.name).joined(separator: ", "))
                }
                chosen = match
            } else if let current = await eto.context.enterprise, let match = enterprises.first(where: { $0.id == current }) {
                chosen = match
            } else if enterprises.count == 1 {
                chosen = enterprises[0]
            } else {
                throw CLIFailure("name the enterprise with --enterprise: " + enterprises.map(\.name).joined(separator: ", "))
            }
            let sites = try await eto.sites(enterprise: chosen.id)
            guard let match = sites.first(where: { Self.matches(site, id: String($0.id), name: $0.name) }) else {
                throw CLIFailure("no site '\(site)' of yours in \(chosen.name); yours: " + sites.map { "\($0.id) \($0.name)" }.joined(separator: ", "))
            }
            try await eto.selectSite(match.id, enterprise: chosen.id)
            try await save(client)
        }
        if let program {
            let programs = try await eto.programs()
            guard let match = programs.first(where: { Self.matches(program, id: String($0.id), name: $0.name) }) else {
                throw CLIFailure("no program '\(program)' at this site; its programs: " + programs.map { "\($0.id) \($0.name)" }.joined(separator: ", "))
            }
            guard !match.disabled else { throw CLIFailure("program \(match.id) (\(match.name)) is disabled") }
            try await eto.selectProgram(match.id)
            try await save(client)
        }
        try await show(eto)
    }

    private func save(_ client: DocketClient) async throws {
        guard let login = await client.session.etoLogin else { return }
        try CLIEnvironment.current.credentialStore.save(.eto(login), for: client.session.instance)
    }

    static func matches(_ text: String, id: String, name: String) -> Bool {
        text.caseInsensitiveCompare(id) == .orderedSame || text.caseInsensitiveCompare(name) == .orderedSame
    }

    /// The chosen context, and the choices of the next step.
    private func show(_ eto: ETOService) async throws {
        let environment = CLIEnvironment.current
        let context = await eto.context
        let enterprises = try await eto.enterprises()
        let enterprise = enterprises.first { $0.id == context.enterprise }
        var sites: [ETOChoice] = []
        if let enterprise { sites = try await eto.sites(enterprise: enterprise.id) }
        let site = sites.first { $0.id == context.site }
        let programs = site == nil ? [] : try await eto.programs()
        let program = programs.first { $0.id == context.program }
        if output.json {
            func choice(_ value: ETOChoice) -> JSONValue {
                JSONValue(members: [("id", .integer(value.id)), ("name", .string(value.name)), ("disabled", .bool(value.disabled))])
            }
            var members: [(String, JSONValue)] = [
                ("email", .string(context.email)),
                ("enterprise", enterprise.map { JSONValue(members: [("id", .string($0.id)), ("name", .string($0.name))]) } ?? .null),
                ("site", site.map(choice) ?? .null), ("program", program.map(choice) ?? .null),
            ]
            if enterprise == nil {
                members.append(("enterprises", .array(enterprises.map { JSONValue(members: [("id", .string($0.id)), ("name", .string($0.name))]) })))
            } else if site == nil {
                members.append(("sites", .array(sites.map(choice))))
            } else {
                members.append(("programs", .array(programs.map(choice))))
            }
            return environment.print(WorkOutput.text(JSONValue(members: members)))
        }
        environment.print("Signed in as \(context.email)")
        environment.print("Enterprise  \(enterprise?.name ?? "(none chosen)")")
        environment.print("Site        \(site.map { "\($0.id) \($0.name)" } ?? "(none chosen)")")
        environment.print("Program     \(program.map { "\($0.id) \($0.name)" } ?? "(none chosen)")")
        if enterprise == nil || site == nil {
            if enterprise == nil {
                environment.print("\nYour enterprises and their sites (choose with --enterprise NAME --site ID):")
                for item in enterprises {
                    environment.print("  \(item.name)  \(item.id)")
                    for site in try await eto.sites(enterprise: item.id) { environment.print("    \(site.id)  \(site.name)") }
                }
            } else {
                environment.print("\nYour sites (choose with --site ID):")
                for item in sites { environment.print("  \(item.id)  \(item.name)") }
            }
        } else if program == nil {
            environment.print("\nPrograms (choose with --program ID):")
            for item in programs { environment.print("  \(item.id)  \(item.name)" + (item.disabled ? "  (disabled)" : "")) }
        }
    }
}
