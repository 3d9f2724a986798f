import ArgumentParser
import DocketKit
import DocketModel
import Foundation

// ETO's participants and TouchPoints, in the context chosen with `docket context`.

extension ConnectionOptions {
    /// The ETO service of the saved ETO login.
    func eto(_ command: String) throws -> (DocketClient, ETOService) {
        let client = try client()
        guard case .eto = client.session.credentials else {
            throw CLIFailure("'docket \(command)' is for ETO logins: sign in with 'docket login URL --user EMAIL --eto'")
        }
        return (client, client.eto)
    }
}

enum ETOOutput {
    static func json(_ participant: ETOParticipant) -> JSONValue {
        JSONValue(members: [
            ("id", .integer(participant.id)), ("first_name", .string(participant.firstName)),
            ("last_name", .string(participant.lastName)), ("date_of_birth", participant.dateOfBirth.map(JSONValue.string) ?? .null),
            ("subject_id", .integer(participant.subjectID)), ("site_id", .integer(participant.siteID)),
        ])
    }

    static func line(_ participant: ETOParticipant) -> String {
        "\(participant.id)  \(participant.lastName), \(participant.firstName)" + (participant.dateOfBirth.map { "  born \($0)" } ?? "")
    }
}

struct ParticipantsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "participants", abstract: "Find ETO participants.", subcommands: [SearchParticipantsCommand.self]
    )
}

struct SearchParticipantsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search", abstract: "Participants of the chosen program whose first or last name contains TERM."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Part of a first or last name.")
    var term: String

    @OptionGroup var output: OutputOptions

    func run() async throws {
        let (_, eto) = try connection.eto("participants search")
        let found = try await eto.searchParticipants(term)
        let environment = CLIEnvironment.current
        if output.json { return environment.print(WorkOutput.text(.array(found.map(ETOOutput.json)))) }
        if found.isEmpty { return environment.print("No participant of this program matches '\(term)'.") }
        for participant in found { environment.print(ETOOutput.line(participant)) }
    }
}

struct ParticipantCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "participant", abstract: "Show an ETO participant.", subcommands: [ShowParticipantCommand.self]
    )
}

struct ShowParticipantCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show a participant of the chosen site.")

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Participant id (CLID).")
    var id: Int

    @OptionGroup var output: OutputOptions

    func run() async throws {
        let (_, eto) = try connection.eto("participant show")
        let participant = try await eto.participant(id)
        let environment = CLIEnvironment.current
        if output.json { return environment.print(WorkOutput.text(ETOOutput.json(participant))) }
        environment.print("Participant    \(participant.id)")
        environment.print("Name           \(participant.firstName) \(participant.lastName)")
        if let born = participant.dateOfBirth { environment.print("Date of birth  \(born)") }
        environment.print("Subject ID     \(participant.subjectID)")
        environment.print("Site           \(participant.siteID)")
    }
}

struct TouchPointCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "touchpoint", abstract: "List ETO TouchPoints (forms) and record responses.",
        subcommands: [ListTouchPointsCommand.self, AddResponseCommand.self]
    )
}

struct ListTouchPointsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "The TouchPoints with their elements and choices.")

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let (_, eto) = try connection.eto("touchpoint list")
        let environment = CLIEnvironment.current
        for form in try await eto.touchPoints() {
            environment.print("\(form.id)  \(form.name)")
            for element in form.elements {
                let kind = element.type == 4 ? "choice" : element.type == 9 ? "date MM/dd/yyyy" : "text"
                environment.print("    \(element.id)  \(element.stimulus) (\(kind)\(element.isRequired ? ", required" : ""))"
                    + (element.choices.isEmpty ? "" : ": " + element.choices.map(\.name).joined(separator: ", ")))
            }
        }
    }
}

struct AddResponseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Record a response: docket touchpoint add FORM --participant ID element=value …",
        discussion: """
            FORM is the TouchPoint's id or name; each element is named by its id or its text ('Sleeping location=Street'). \
            The response goes to the program chosen with 'docket context'. 'docket touchpoint list' shows the elements.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "TouchPoint id or name.")
    var form: String

    @Option(help: "Participant id (CLID).")
    var participant: Int

    @Argument(help: "element=value pairs.")
    var answers: [String] = []

    func run() async throws {
        let pairs = try FieldArguments.parse(answers)
        let (_, eto) = try connection.eto("touchpoint add")
        let forms = try await eto.touchPoints()
        guard let touchPoint = forms.first(where: { ContextCommand.matches(form, id: String($0.id), name: $0.name) }) else {
            throw CLIFailure("no TouchPoint '\(form)'; there are: " + forms.map { "\($0.id) \($0.name)" }.joined(separator: ", "))
        }
        var values: [Int: String] = [:]
        for (name, value) in pairs {
            guard let element = touchPoint.elements.first(where: { ContextCommand.matches(name, id: String($0.id), name: $0.stimulus) }) else {
                throw CLIFailure("\(touchPoint.name) has no element '\(name)'; it has: " + touchPoint.elements.map(\.stimulus).joined(separator: ", "))
            }
            values[element.id] = value
        }
        let person = try await eto.participant(participant)
        let id = try await eto.addResponse(to: touchPoint, participant: person, answers: values)
        CLIEnvironment.current.print("Recorded response \(id) to \(touchPoint.name) for \(person.firstName) \(person.lastName).")
    }
}
