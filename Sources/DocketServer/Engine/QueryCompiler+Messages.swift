import DocketModel

/// What a query is told when a name in it reaches no column.
extension QueryCompiler {
    /// Why a (possibly dot-walked) field name resolves to no column, with the field meant where one is close.
    func unknownPath(_ name: String) -> String {
        let path = name.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var current = table
        for (index, segment) in path.enumerated() {
            guard let field = current.field(segment) else {
                let walked = path[..<index].joined(separator: ".")
                return Self.unknownField(segment, in: current) + (walked.isEmpty ? "" : " (reached through \(walked))")
            }
            if field.type == .password { return "'\(field.name)' cannot be queried" }
            if index == path.count - 1 { return "'\(name.prefix(200))' is not a field that can be queried" }
            guard field.type == .reference, let target = field.reference.flatMap({ catalog.table($0) }) else {
                return "'\(field.name)' of \(current.name) is not a reference, so '\(name.prefix(200))' cannot be followed"
            }
            current = target
        }
        return "'\(name.prefix(200))' is not a field of \(table.name)"
    }

    /// "No field 'staet' in incident; did you mean state?"
    static func unknownField(_ name: String, in table: SchemaCatalog.Table) -> String {
        "No field '\(name.prefix(80))' in \(table.name)" + suggestion(name, among: table.fields.map(\.name))
    }

    /// "; did you mean …?" for the names closest to `typed`, or "".
    static func suggestion(_ typed: String, among names: [String]) -> String {
        let phrase = Suggestions.phrase(for: typed, among: names)
        return phrase.isEmpty ? "" : "; " + phrase
    }
}
