import ArgumentParser
import DocketServer
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users", abstract: "Manage accounts in a data folder.", subcommands: [ListUsers.self, CreateUser.self, SeedUsers.self, LinkUser.self, UnlinkUser.self, ListLinks.self, CreateAPIKey.self, RegisterCertificate.self]
    )
}

struct SeedUsers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seed",
        abstract: "Create many accounts at once, for load tests and demonstrations.",
        discussion: """
            Creates COUNT accounts named PREFIX followed by a number (load.user.0001 …), all with the password read \
            from the first line of standard input and the roles given. The password is hashed once and every account \
            stores that hash, so a thousand accounts take seconds; --cost 4 also makes signing them all in cheap \
            (never for real accounts). Refused when an account with the prefix exists. Run it while no docketd serves \
            the data folder. Example: echo 'password' | docketd users seed 1000 --prefix load.user. --role itil --cost 4
            """
    )

    @Argument(help: "How many accounts (1 to \(UserAdministration.seedLimit)).")
    var count: Int

    @Option(help: "The start of every user name; a number follows.")
    var prefix: String

    @Option(name: .customLong("role"), help: "A role to give every account (repeatable), e.g. --role itil.")
    var roles: [String] = []

    @Option(help: "The bcrypt cost of the shared hash (4 to 31; default the server's, 12).")
    var cost: UInt8?

    @OptionGroup var location: StorageOptions

    func run() async throws {
        let password = readLine(strippingNewline: true) ?? ""
        // The database may be new: creating users is how a data folder started without --demo gets its first.
        let configuration = try location.configuration(mustExist: false)
        let started = ContinuousClock.now
        let names = try await explainingFailures {
            try await UserAdministration.seedUsers(
                in: configuration, prefix: prefix, count: count, password: password, roles: roles, cost: cost
            )
        }
        let roleText = roles.isEmpty ? "" : " with roles: \(roles.joined(separator: ", "))"
        print("Created \(names.count) users, \(names.first ?? "") to \(names.last ?? "")\(roleText), in \(ContinuousClock.now - started).")
    }
}

struct CreateUser: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create an account, such as the first administrator.",
        discussion: """
            The password is asked for twice on the terminal (not echoed), or read from the first line of standard \
            input with --password-stdin; it is never taken from the command line, where other users could see it. \
            It needs at least 8 characters. Example: docketd users create --admin alice --data-dir /var/lib/docket
            """
    )

    @Argument(help: "The user name to log in with (user_name).")
    var userName: String

    @Flag(help: "Give the account the admin role.")
    var admin = false

    @Option(name: .customLong("role"), help: "Another role to give (repeatable), e.g. --role itil.")
    var roles: [String] = []

    @OptionGroup var location: StorageOptions

    @Option(help: "First name.") var firstName: String = ""
    @Option(help: "Last name.") var lastName: String = ""
    @Option(help: "Email address.") var email: String = ""

    @Flag(help: "Read the password from the first line of standard input.")
    var passwordStdin = false

    func run() async throws {
        let password: String
        if passwordStdin {
            password = readLine(strippingNewline: true) ?? ""
        } else {
            guard isatty(STDIN_FILENO) == 1 else {
                throw ValidationError("Standard input is not a terminal: pass the password with --password-stdin.")
            }
            let first = Self.prompt("Password for \(userName): ")
            guard Self.prompt("Repeat it: ") == first else { throw ValidationError("The passwords differ.") }
            password = first
        }
        // The database may be new: creating users is how a data folder started without --demo gets its first.
        let configuration = try location.configuration(mustExist: false)
        try await explainingFailures {
            try await UserAdministration.createUser(
                in: configuration, userName: userName, password: password, roles: (admin ? ["admin"] : []) + roles,
                firstName: firstName, lastName: lastName, email: email
            )
        }
        let roleText = ((admin ? ["admin"] : []) + roles).joined(separator: ", ")
        print("Created user \(userName)\(roleText.isEmpty ? "" : " with roles: \(roleText)") in \(configuration.storageLocation.redacted).")
    }

    /// Reads a line from the terminal without echoing it.
    private static func prompt(_ text: String) -> String {
        FileHandle.standardError.write(Data(text.utf8))
        var settings = termios()
        tcgetattr(STDIN_FILENO, &settings)
        var quiet = settings
        quiet.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &settings)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        return readLine(strippingNewline: true) ?? ""
    }
}

struct LinkUser: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "link",
        abstract: "Link an identity of a trusted OpenID provider to an account.",
        discussion: """
            From then on, tokens of that provider whose subject (sub) is SUBJECT sign in as USER, whatever user name \
            or e-mail they carry. docketd links an identity by itself only when the provider verified an e-mail that one \
            account has (never an administrator's account), or, with --oidc-provision, to a new account made for it: \
            this is how an administrator links any other, or one an earlier unlink refused. An earlier link of the \
            identity is replaced. A running docketd follows within a minute. Example: \
            docketd users link alice --issuer https://sso.example.com/realms/acme --subject 0f1e2d3c --data-dir /var/lib/docket
            """
    )

    @Argument(help: "The account's user name.")
    var userName: String

    @OptionGroup var identity: OutsideIdentity

    @OptionGroup var location: StorageOptions

    func run() async throws {
        let configuration = try location.configuration(mustExist: true)
        let (issuer, subject) = (identity.issuer, identity.subject)
        let change = try await explainingFailures {
            try await UserAdministration.link(in: configuration, userName: userName, issuer: issuer, subject: subject)
        }
        print("Linked \(subject) at \(issuer) to \(userName)\(change.before.map { " (it was linked to \($0))" } ?? "").")
    }
}

struct CreateAPIKey: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "api-key",
        abstract: "Make a REST API key for an account (sent as the x-sn-apikey header).",
        discussion: """
            Prints the key once: docketd keeps only its SHA-256. A request with the header x-sn-apikey: KEY is that \
            account's, for as long as the key is active (api_key.active, which an administrator can turn off in the \
            Table API or the web UI) and unexpired. Example: \
            docketd users api-key itil.user --name ansible --expires-days 90 --data-dir /var/lib/docket
            """
    )

    @Argument(help: "The account's user name.")
    var userName: String

    @Option(help: "What the key is for (shown in api_key).")
    var name: String

    @Option(help: "Days until the key expires (default: it does not).")
    var expiresDays: Int?

    @OptionGroup var location: StorageOptions

    func run() async throws {
        let configuration = try location.configuration(mustExist: true)
        if let days = expiresDays, !(1...36_500).contains(days) {
            throw ValidationError("--expires-days must be 1 to 36500.")
        }
        let expires = expiresDays.map { Date().addingTimeInterval(Double($0) * 86_400) }
        let key = try await explainingFailures {
            try await UserAdministration.createAPIKey(in: configuration, userName: userName, name: name, expires: expires)
        }
        print(key)
    }
}

struct RegisterCertificate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "certificate",
        abstract: "Register a client certificate that signs in as an account (with --tls-client-ca).",
        discussion: """
            A client that presents this certificate over HTTPS signs in as USER, when docketd runs with \
            --tls-client-ca naming the authority that issued it. The certificate is registered by its SHA-256 \
            fingerprint (printed), never by a name it carries, and until it expires or an administrator turns \
            sys_user_certificate.active off. Example: \
            docketd users certificate itil.user --certificate client.pem --data-dir /var/lib/docket
            """
    )

    @Argument(help: "The account's user name.")
    var userName: String

    @Option(help: "The client certificate, a PEM file.")
    var certificate: String

    @OptionGroup var location: StorageOptions

    func run() async throws {
        let configuration = try location.configuration(mustExist: true)
        let fingerprint = try await explainingFailures {
            try await UserAdministration.registerCertificate(in: configuration, userName: userName, certificatePath: certificate)
        }
        print("Registered the certificate \(fingerprint) to \(userName).")
    }
}

struct UnlinkUser: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlink",
        abstract: "Remove the link of an identity of a trusted OpenID provider.",
        discussion: """
            The identity then signs in as nobody, and docketd does not link it again by itself (not by a verified \
            e-mail, not by --oidc-provision) until an administrator links it with docketd users link. A running docketd \
            follows within a minute.
            """
    )

    @OptionGroup var identity: OutsideIdentity

    @OptionGroup var location: StorageOptions

    func run() async throws {
        let configuration = try location.configuration(mustExist: true)
        let (issuer, subject) = (identity.issuer, identity.subject)
        let change = try await explainingFailures {
            try await UserAdministration.unlink(in: configuration, issuer: issuer, subject: subject)
        }
        print("Unlinked \(subject) at \(issuer)\(change.before.map { " from \($0)" } ?? "").")
    }
}

struct ListUsers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the accounts: user name, name, roles, and whether each can sign in with a password."
    )

    @OptionGroup var location: StorageOptions

    func run() async throws {
        let configuration = try location.configuration(mustExist: true)
        let shown = 10_000
        let accounts = try await explainingFailures { try await UserAdministration.list(in: configuration, limit: shown) }
        if accounts.isEmpty { return print("No accounts. Create one: docketd users create NAME --admin") }
        func pad(_ text: String, _ width: Int) -> String { text.padding(toLength: max(width, text.count), withPad: " ", startingAt: 0) }
        let nameWidth = max(9, min(24, accounts.map(\.userName.count).max() ?? 9))
        print([pad("USER NAME", nameWidth), pad("NAME", 22), pad("SIGN-IN", 12), "ROLES"].joined(separator: "  "))
        for account in accounts {
            let state = !account.active ? "inactive" : account.lockedOut ? "locked out" : account.hasPassword ? "password" : "no password"
            print([pad(account.userName, nameWidth), pad(account.name, 22), pad(state, 12), account.roles.joined(separator: ",")].joined(separator: "  "))
        }
        if accounts.count == shown { print("(the first \(shown) by user name; the Table API lists the rest: /api/now/table/sys_user)") }
    }
}

struct ListLinks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "links", abstract: "List the identities of trusted OpenID providers linked to accounts."
    )

    @Argument(help: "Only this account's links.")
    var userName: String?

    @OptionGroup var location: StorageOptions

    func run() async throws {
        let configuration = try location.configuration(mustExist: true)
        let links = try await explainingFailures { try await UserAdministration.links(in: configuration, userName: userName) }
        if links.isEmpty { print("No linked identities.") }
        for link in links { print("\(link.userName)\t\(link.issuer)\t\(link.subject)\t\(link.origin)") }
    }
}

/// An identity at a trusted OpenID provider: its issuer and the person's subject there.
struct OutsideIdentity: ParsableArguments {
    @Option(help: "The provider's issuer, exactly as its tokens' iss says it (as given to --oidc-trust).")
    var issuer: String

    @Option(help: "The person's subject at the provider, as its tokens' sub says it.")
    var subject: String
}
