import Foundation

/// Query-string decoding as servlet containers do it: `+` is a space, then percent-decoding. Python's
/// `requests` (pysnc, pysnow) encodes spaces as `+`, so `short_descriptionLIKEmy+pc` must mean "my pc".
enum FormQuery {
    static func parse(_ query: String?) -> [(String, String)] {
        guard let query, !query.isEmpty else { return [] }
        return query.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }

    /// `+` becomes a space and `%XX` its byte; a `%` not followed by two hex digits is kept as it is.
    static func decode(_ text: Substring) -> String {
        let utf8 = text.utf8
        guard utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "%") }) else { return String(text) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var index = utf8.startIndex
        while index != utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%"),
                let first = utf8.index(index, offsetBy: 1, limitedBy: utf8.endIndex), first != utf8.endIndex,
                let second = utf8.index(first, offsetBy: 1, limitedBy: utf8.endIndex), second != utf8.endIndex,
                let high = hexValue(utf8[first]), let low = hexValue(utf8[second])
            {
                bytes.append(high << 4 | low)
                index = second
            } else {
                bytes.append(byte)
            }
            index = utf8.index(after: index)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: return byte - 0x30
        case 0x41...0x46: return byte - 0x37
        case 0x61...0x66: return byte - 0x57
        default: return nil
        }
    }

    private static let allowed: CharacterSet = {
        CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~,")
    }()

    static func encode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
