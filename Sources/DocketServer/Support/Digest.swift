import Crypto
import NIOCore

/// SHA-256 digests as lowercase hex (token hashes, attachment hashes).
enum Digest {
    private static let digits = Array("0123456789abcdef".utf8)

    static func sha256Hex(_ buffer: ByteBuffer) -> String { sha256Hex(buffer.readableBytesView) }

    static func sha256Hex(_ bytes: some Sequence<UInt8>) -> String {
        var hasher = SHA256()
        // Contiguous bytes (an array, a ByteBuffer's view) are hashed where they are, not copied.
        let hashed: Void? = bytes.withContiguousStorageIfAvailable { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        if hashed == nil { hasher.update(data: Array(bytes)) }
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for byte in hasher.finalize() {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
