import Foundation

/// A `javascript:` value from the fixed whitelist that Docket recognises in encoded queries.
///
/// The text is matched, never executed: anything outside this list is not a dynamic value.
///
/// ```swift
/// DynamicValue("javascript:gs.getUserID()") // .userID
/// DynamicValue("javascript:gs.daysAgoStart(3)") // .daysAgoStart(3)
/// ```
public enum DynamicValue: Sendable, Equatable {
    case userID
    case userName
    case beginningOfToday
    case endOfToday
    case beginningOfYesterday
    case endOfYesterday
    case beginningOfLast7Days
    case beginningOfLast30Days
    case daysAgo(Int)
    case daysAgoStart(Int)
    case daysAgoEnd(Int)
    case hoursAgo(Int)
    case minutesAgo(Int)
    /// `gs.dateGenerate('YYYY-MM-DD','HH:MM:SS')`: the given UTC date-time.
    case dateGenerate(String)
    /// `gs.nowDateTime()`.
    case now

    /// Recognises a whitelisted dynamic value; nil for plain values and for unknown scripts.
    public init?(_ text: String) {
        guard text.hasPrefix("javascript:") else { return nil }
        var body = Substring(text.dropFirst("javascript:".count)).trimmingSpaces
        if body.hasSuffix(";") { body = body.dropLast().trimmingSpaces }
        if body.hasPrefix("gs.") { body = body.dropFirst(3) }
        let simple: [String: DynamicValue] = [
            "getUserID()": .userID, "getUserName()": .userName, "beginningOfToday()": .beginningOfToday,
            "endOfToday()": .endOfToday, "beginningOfYesterday()": .beginningOfYesterday,
            "endOfYesterday()": .endOfYesterday, "beginningOfLast7Days()": .beginningOfLast7Days,
            "beginningOfLast30Days()": .beginningOfLast30Days, "nowDateTime()": .now, "nowNoTZ()": .now,
        ]
        if let value = simple[String(body)] {
            self = value
            return
        }
        guard let open = body.firstIndex(of: "("), body.hasSuffix(")") else { return nil }
        let name = body[..<open]
        let argument = body[body.index(after: open)..<body.index(before: body.endIndex)]
        if name == "dateGenerate" {
            let pieces = argument.split(separator: ",").map {
                $0.trimmingSpaces.trimmingCharacters(in: "'\"")
            }
            guard pieces.count == 2, let normalized = GlideDateTime.normalize(pieces[0] + " " + pieces[1]) else {
                return nil
            }
            self = .dateGenerate(normalized)
            return
        }
        guard let count = Int(argument.trimmingSpaces), count >= 0, count <= 100_000 else { return nil }
        switch name {
        case "daysAgo": self = .daysAgo(count)
        case "daysAgoStart": self = .daysAgoStart(count)
        case "daysAgoEnd": self = .daysAgoEnd(count)
        case "hoursAgo": self = .hoursAgo(count)
        case "minutesAgo": self = .minutesAgo(count)
        default: return nil
        }
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var result = self
        while result.first == " " { result = result.dropFirst() }
        while result.last == " " { result = result.dropLast() }
        return result
    }

    func trimmingCharacters(in set: String) -> String {
        var result = self
        while let first = result.first, set.contains(first) { result = result.dropFirst() }
        while let last = result.last, set.contains(last) { result = result.dropLast() }
        return String(result)
    }
}

extension DynamicValue {
    /// The value this dynamic value stands for, for a caller at a moment: a sys_id, a user name, or a UTC
    /// date-time string.
    public func resolve(userID: String, userName: String, now: Date) -> String {
        let day = 86_400.0
        let startOfToday = (now.timeIntervalSince1970 / day).rounded(.down) * day
        func at(_ seconds: Double) -> String { GlideDateTime.format(Date(timeIntervalSince1970: seconds)) }
        switch self {
        case .userID: return userID
        case .userName: return userName
        case .now: return GlideDateTime.format(now)
        case .beginningOfToday: return at(startOfToday)
        case .endOfToday: return at(startOfToday + day - 1)
        case .beginningOfYesterday: return at(startOfToday - day)
        case .endOfYesterday: return at(startOfToday - 1)
        case .beginningOfLast7Days: return at(startOfToday - 6 * day)
        case .beginningOfLast30Days: return at(startOfToday - 29 * day)
        case .daysAgo(let n): return at(now.timeIntervalSince1970 - Double(n) * day)
        case .daysAgoStart(let n): return at(startOfToday - Double(n) * day)
        case .daysAgoEnd(let n): return at(startOfToday - Double(n) * day + day - 1)
        case .hoursAgo(let n): return at(now.timeIntervalSince1970 - Double(n) * 3600)
        case .minutesAgo(let n): return at(now.timeIntervalSince1970 - Double(n) * 60)
        case .dateGenerate(let value): return value
        }
    }
}
