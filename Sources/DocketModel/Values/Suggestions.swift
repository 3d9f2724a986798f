/// "Did you mean …?": the known names closest to a name someone typed.
///
/// Closeness is the optimal-string-alignment distance (insertions, deletions, substitutions and swaps of two
/// neighbouring characters each cost one), ignoring case, so `staet` is one step from `state` and
/// `short_descriptoin` one from `short_description`. A name is suggested only when it is at most a third of its
/// length away (and at least one, at most four steps): a guess further off is noise.
public enum Suggestions {
    /// Up to `limit` of `names` closest to `typed`, closest first (ties in the given order); empty when none is
    /// close.
    public static func closest(to typed: String, among names: some Sequence<String>, limit: Int = 3) -> [String] {
        let target = Array(typed.lowercased().unicodeScalars)
        guard !target.isEmpty, target.count <= 200 else { return [] }
        var scored: [(name: String, distance: Int, order: Int)] = []
        for (order, name) in names.enumerated() {
            let candidate = Array(name.lowercased().unicodeScalars)
            let allowed = min(4, max(1, min(candidate.count, target.count) / 3))
            guard abs(candidate.count - target.count) <= allowed,
                let distance = distance(target, candidate, atMost: allowed)
            else { continue }
            scored.append((name, distance, order))
        }
        return scored.sorted { ($0.distance, $0.order) < ($1.distance, $1.order) }.prefix(max(0, limit)).map(\.name)
    }

    /// " (did you mean a, b?)"-style text for a message, or "" when nothing is close.
    public static func phrase(for typed: String, among names: some Sequence<String>) -> String {
        let found = closest(to: typed, among: names)
        return found.isEmpty ? "" : "did you mean " + found.joined(separator: ", ") + "?"
    }

    /// The optimal-string-alignment distance of two strings, or nil when it is above `bound`.
    static func distance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar], atMost bound: Int) -> Int? {
        if a == b { return 0 }
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) <= bound ? max(a.count, b.count) : nil }
        var previous2 = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        var previousMinimum = 0
        for i in 1...a.count {
            current[0] = i
            var rowMinimum = current[0]
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { value = min(value, previous2[j - 2] + 1) }
                current[j] = value
                rowMinimum = min(rowMinimum, value)
            }
            // A later row is at least the smaller of this row's least and the last row's least plus one (a swap).
            if rowMinimum > bound, previousMinimum >= bound { return nil }
            previousMinimum = rowMinimum
            (previous2, previous, current) = (previous, current, previous2)
        }
        return previous[b.count] <= bound ? previous[b.count] : nil
    }
}
