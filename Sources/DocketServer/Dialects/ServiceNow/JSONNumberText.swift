import DocketModel

/// The text of a JSON number where the wire wants a string (batch and sub-request ids): whole numbers without
/// a fraction when they fit 64 bits, anything else (`1e300`, `1.5`) in Swift's shortest round-trip form.
enum JSONNumberText {
    static func of(_ number: Double) -> String {
        if let whole = Int64(exactly: number) { return String(whole) }
        return String(number)
    }
}
