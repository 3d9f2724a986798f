import Foundation

/// The `YYYY-MM-DD HH:MM:SS` UTC date-time format that ServiceNow uses on the wire and in encoded queries.
///
/// ```swift
/// GlideDateTime.format(Date(timeIntervalSince1970: 0)) // "1970-01-01 00:00:00"
/// GlideDateTime.parse("2024-03-01 14:00:00")           // a Date
/// ```
public enum GlideDateTime {
    /// Formats a date as `YYYY-MM-DD HH:MM:SS` in UTC.
    /// Dates outside years 0001 to 9999 (which the format cannot show) are clamped to that range.
    public static func format(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        var seconds = interval.isNaN ? 0 : Int(min(max(interval.rounded(.down), minimumSeconds), maximumSeconds))
        var days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        seconds -= days * 86_400
        let (year, month, day) = civil(fromDays: &days)
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + " " + pad(seconds / 3600, 2) + ":"
            + pad(seconds / 60 % 60, 2) + ":" + pad(seconds % 60, 2)
    }

    /// 0001-01-01 00:00:00 and 9999-12-31 23:59:59 UTC, in seconds since 1970.
    private static let minimumSeconds: Double = -62_135_596_800
    private static let maximumSeconds: Double = 253_402_300_799

    /// Formats a date as `YYYY-MM-DD HH:MM:SS` in a time zone (a user's, for display values).
    public static func format(_ date: Date, in timeZone: TimeZone) -> String {
        format(date.addingTimeInterval(TimeInterval(timeZone.secondsFromGMT(for: date))))
    }

    /// Parses a local date-time of a time zone (a user's display value) into the moment it names.
    public static func parse(_ text: String, in timeZone: TimeZone) -> Date? {
        guard let naive = parse(text) else { return nil }
        // The offset depends on the moment, which depends on the offset: two steps settle it across DST.
        var date = naive.addingTimeInterval(-TimeInterval(timeZone.secondsFromGMT(for: naive)))
        date = naive.addingTimeInterval(-TimeInterval(timeZone.secondsFromGMT(for: date)))
        return date
    }

    /// Formats a date as `YYYY-MM-DD` in UTC.
    public static func formatDate(_ date: Date) -> String {
        String(format(date).prefix(10))
    }

    /// Parses `YYYY-MM-DD HH:MM:SS`, `YYYY-MM-DDTHH:MM:SS` (optionally with `Z`) or `YYYY-MM-DD` as UTC.
    /// Returns nil for anything else, including impossible dates such as `2024-02-31`.
    public static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 10 || bytes.count == 19 || (bytes.count == 20 && bytes[19] == UInt8(ascii: "Z"))
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                let byte = bytes[index]
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year)
        else { return nil }
        var hour = 0
        var minute = 0
        var second = 0
        if bytes.count >= 19 {
            guard bytes[10] == UInt8(ascii: " ") || bytes[10] == UInt8(ascii: "T"),
                bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
                let h = number(11..<13), let m = number(14..<16), let s = number(17..<19),
                h < 24, m < 60, s < 60
            else { return nil }
            (hour, minute, second) = (h, m, s)
        }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3600 + minute * 60 + second))
    }

    /// Normalises a date-time string to `YYYY-MM-DD HH:MM:SS`, or nil when it is not a date-time.
    public static func normalize(_ text: String) -> String? {
        parse(text).map(format)
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // Howard Hinnant's civil-calendar algorithms: exact for the proleptic Gregorian calendar.
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    private static func civil(fromDays days: inout Int) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp + (mp < 10 ? 3 : -9)
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
