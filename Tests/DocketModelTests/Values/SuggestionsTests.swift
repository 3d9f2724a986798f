import DocketModel
import Testing

@Suite("Did-you-mean suggestions")
struct SuggestionsTests {
    static let incidentFields = [
        "short_description", "description", "state", "urgency", "impact", "priority", "assigned_to", "assignment_group",
        "caller_id", "category", "subcategory", "comments", "work_notes", "number", "active", "close_notes",
    ]

    @Test("typos find the field meant: a swap, a letter too many, too few or wrong, in any case")
    func typos() {
        #expect(Suggestions.closest(to: "staet", among: Self.incidentFields) == ["state"])
        #expect(Suggestions.closest(to: "short_descriptoin", among: Self.incidentFields) == ["short_description"])
        #expect(Suggestions.closest(to: "urgencyy", among: Self.incidentFields) == ["urgency"])
        #expect(Suggestions.closest(to: "asigned_to", among: Self.incidentFields) == ["assigned_to"])
        #expect(Suggestions.closest(to: "Priorty", among: Self.incidentFields) == ["priority"])
        #expect(Suggestions.closest(to: "categroy", among: Self.incidentFields).first == "category")
    }

    @Test("names far from every known one suggest nothing; an exact name is its own closest")
    func farOff() {
        #expect(Suggestions.closest(to: "nosuchfield", among: Self.incidentFields).isEmpty)
        #expect(Suggestions.closest(to: "x", among: Self.incidentFields).isEmpty)
        #expect(Suggestions.closest(to: "", among: Self.incidentFields).isEmpty)
        #expect(Suggestions.closest(to: String(repeating: "a", count: 10_000), among: Self.incidentFields).isEmpty)
        #expect(Suggestions.closest(to: "state", among: Self.incidentFields).first == "state")
        #expect(Suggestions.phrase(for: "staet", among: Self.incidentFields) == "did you mean state?")
        #expect(Suggestions.phrase(for: "zzz", among: Self.incidentFields) == "")
    }

    @Test("several close names come closest first, at most the limit")
    func order() {
        let names = ["statement", "stage", "start", "state", "stats"]
        #expect(Suggestions.closest(to: "stat", among: names, limit: 2) == ["start", "state"])
        #expect(Suggestions.closest(to: "stae", among: names) == ["stage", "state"])
        #expect(Suggestions.closest(to: "stat", among: names, limit: 0).isEmpty)
    }
}
