import SQLKit

/// A piece of SQL built from literal text, quoted identifiers and bound values.
///
/// Values only ever enter SQL as binds, so the text never contains user data; serialising through SQLKit
/// gives each dialect its own placeholders (`?` for SQLite, `$1` for PostgreSQL).
struct SQLFragment: SQLExpression, Sendable, ExpressibleByStringLiteral {
    enum Piece: Sendable {
        case raw(String)
        case identifier(String)
        case bind(any Encodable & Sendable)
    }

    private(set) var pieces: [Piece]

    init(_ raw: String = "") { pieces = raw.isEmpty ? [] : [.raw(raw)] }
    init(stringLiteral value: String) { self.init(value) }

    static func identifier(_ name: String) -> SQLFragment {
        var fragment = SQLFragment()
        fragment.pieces = [.identifier(name)]
        return fragment
    }

    static func bind(_ value: any Encodable & Sendable) -> SQLFragment {
        var fragment = SQLFragment()
        fragment.pieces = [.bind(value)]
        return fragment
    }

    /// `alias.column`, both quoted.
    static func column(_ alias: String, _ name: String) -> SQLFragment {
        .identifier(alias) + "." + .identifier(name)
    }

    var isEmpty: Bool { pieces.isEmpty }

    /// The names the fragment quotes as identifiers (columns, aliases, tables).
    var identifiers: Set<String> {
        Set(pieces.compactMap { piece -> String? in
            if case .identifier(let name) = piece { return name }
            return nil
        })
    }

    /// The literal text, without identifiers or bound values (for matching statements in tests); in a
    /// ``compacted()`` fragment, plain identifiers are part of the text.
    var rawText: String {
        pieces.compactMap { piece -> String? in
            if case .raw(let text) = piece { return text }
            return nil
        }.joined()
    }

    /// The statement as a trace shows it (`db.query.text`): identifiers quoted, each bound value a `?`, so never a
    /// value; at most `limit` characters.
    func tracedText(limit: Int = 2_000) -> String {
        var text = ""
        for piece in pieces {
            switch piece {
            case .raw(let raw): text += raw
            case .identifier(let name): text += "\"" + name + "\""
            case .bind: text += "?"
            }
            if text.utf8.count > limit { return String(text.prefix(limit)) + "…" }
        }
        return text
    }

    static func + (lhs: SQLFragment, rhs: SQLFragment) -> SQLFragment {
        var result = lhs
        result.pieces += rhs.pieces
        return result
    }

    static func += (lhs: inout SQLFragment, rhs: SQLFragment) { lhs.pieces += rhs.pieces }

    /// A comma-separated list of bound values: `?, ?, ?`.
    static func bindList<T: Encodable & Sendable>(_ values: some Sequence<T>) -> SQLFragment {
        values.map { SQLFragment.bind($0) }.joined(", ")
    }

    /// Like ``bindList(_:)`` for values of mixed types.
    static func bindAnyList(_ values: [any Encodable & Sendable]) -> SQLFragment {
        values.map { SQLFragment.bind($0) }.joined(", ")
    }

    func parenthesized() -> SQLFragment { "(" + self + ")" }

    /// The same SQL with each run of literal text and plain identifiers joined into one piece of text, so that
    /// rendering it takes one append where it took one for each piece: for fragments kept and run many times (a
    /// read's columns, ``RecordStore/ProjectionCache``). Its ``identifiers`` and ``rawText`` see the joined names
    /// as text.
    func compacted() -> SQLFragment {
        var result = SQLFragment()
        var run = ""
        for piece in pieces {
            switch piece {
            case .raw(let text): run += text
            case .identifier(let name) where Self.isPlain(name):
                run += "\""
                run += name
                run += "\""
            default:
                if !run.isEmpty { result.pieces.append(.raw(run)) }
                run = ""
                result.pieces.append(piece)
            }
        }
        if !run.isEmpty { result.pieces.append(.raw(run)) }
        return result
    }

    func serialize(to serializer: inout SQLSerializer) {
        for piece in pieces {
            switch piece {
            case .raw(let text): serializer.write(text)
            case .identifier(let name):
                // Catalog names are plain [a-z0-9_]; quoting them needs no escaping, and skipping SQLKit's
                // generic escape saves a string search per identifier on every statement.
                if Self.isPlain(name) {
                    serializer.write("\"" + name + "\"")
                } else {
                    SQLIdentifier(name).serialize(to: &serializer)
                }
            case .bind(let value): serializer.write(bind: value)
            }
        }
    }
}

extension SQLFragment {
    /// The statement as PostgreSQL takes it, its values handed to `bind` in order: the text SQLKit's serializer
    /// with PostgreSQL's dialect gives (`$1`, `$2`, … for the values; identifiers in double quotes, a quote in one
    /// doubled), made in one pass without the serializer's dialect lookups and boxed placeholders (about 2 % of a
    /// POST's CPU on PostgreSQL).
    func postgresText(_ bind: (any Encodable & Sendable) throws -> Void) rethrows -> String {
        var text = ""
        var count = 0
        for piece in pieces {
            switch piece {
            case .raw(let raw): text += raw
            case .identifier(let name):
                text += "\""
                text += Self.isPlain(name) ? name : name.replacingOccurrences(of: "\"", with: "\"\"")
                text += "\""
            case .bind(let value):
                try bind(value)
                count += 1
                text += "$"
                text += String(count)
            }
        }
        return text
    }

    static func isPlain(_ name: String) -> Bool {
        name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5f }
    }
}

extension Sequence where Element == SQLFragment {
    func joined(_ separator: String) -> SQLFragment {
        var result = SQLFragment()
        for (index, fragment) in enumerated() {
            if index > 0 { result += SQLFragment(separator) }
            result += fragment
        }
        return result
    }
}
