/// A record identifier: 32 lowercase hexadecimal characters for ordinary records.
///
/// ServiceNow treats sys_ids as opaque strings of at most 32 characters (some base records use ids such
/// as `global`), so ``isValid(_:)`` accepts any short identifier-like string, while ``generate()`` always
/// produces the canonical GUID form.
///
/// ```swift
/// let id = SysID.generate()            // "9d385017c611228701d22104cc95c371"
/// let seeded = SysID.stable("incident-1") // the same every run
/// ```
public enum SysID {
    /// A new random sys_id (128 bits from the system's secure random source).
    public static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        return hex(generator.next() as UInt64) + hex(generator.next() as UInt64)
    }

    /// A deterministic sys_id derived from a seed string, for demo data and fixtures.
    public static func stable(_ seed: String) -> String {
        // Two FNV-1a passes with different offsets give 128 well-spread bits; not for security.
        var a = FNV1a.offsetBasis
        var b: UInt64 = 0x8422_2325_cbf2_9ce4
        for byte in seed.utf8 {
            a = FNV1a.step(a, byte)
            b = FNV1a.step(b, byte) &+ (a >> 29)
        }
        return hex(mix(a)) + hex(mix(b ^ a))
    }

    /// MurmurHash3's 64-bit finaliser: every input bit affects every output bit.
    private static func mix(_ value: UInt64) -> UInt64 {
        var x = value
        x ^= x >> 33
        x = x &* 0xff51_afd7_ed55_8ccd
        x ^= x >> 33
        x = x &* 0xc4ce_b9fe_1a85_ec53
        x ^= x >> 33
        return x
    }

    /// Whether a string can be used as a sys_id: 1–32 characters of letters, digits, `.`, `_` or `-`.
    public static func isValid(_ value: String) -> Bool {
        guard !value.isEmpty, value.utf8.count <= 32 else { return false }
        return value.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                || byte == 0x2e || byte == 0x5f || byte == 0x2d
        }
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
