/// FNV-1a, 64 bits: a fast, stable hash for keys that must agree across processes and versions (advisory lock
/// keys, deterministic sys_ids). Not for security.
public enum FNV1a {
    public static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325
    public static let prime: UInt64 = 0x0000_0100_0000_01b3

    /// One step: `hash` with `byte` folded in.
    @inlinable
    public static func step(_ hash: UInt64, _ byte: UInt8) -> UInt64 { (hash ^ UInt64(byte)) &* prime }

    /// The hash of `bytes`, from `basis`.
    @inlinable
    public static func hash(_ bytes: some Sequence<UInt8>, basis: UInt64 = offsetBasis) -> UInt64 {
        bytes.reduce(basis, step)
    }
}
