import Foundation
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Push endpoints are addresses a user chose: docketd sends to them only when they are public HTTPS addresses,
/// never into the network docketd runs in (loopback, private, link-local, carrier-grade NAT, multicast or
/// reserved addresses, IPv4 or IPv6), unless `--push-allow-insecure-endpoints` admits `http://` and such
/// addresses too (closed networks, tests). The host is resolved and every address it names is checked, when a
/// subscription is registered and again before each send.
struct EndpointGuard: Sendable {
    struct Refusal: Error, Equatable, CustomStringConvertible {
        let description: String
    }

    let allowInsecure: Bool
    /// Names resolved for a check (tests replace it).
    var resolve: @Sendable (String) async throws -> [[UInt8]] = EndpointGuard.systemResolve

    /// The longest endpoint accepted (UnifiedPush: 1000 bytes).
    static let maximumLength = 1000

    func check(_ text: String) async throws(Refusal) -> URL {
        guard text.utf8.count <= Self.maximumLength else { throw Refusal(description: "the endpoint is longer than 1000 bytes") }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty,
            url.user == nil, url.password == nil
        else { throw Refusal(description: "the endpoint must be an absolute http(s) URL without credentials") }
        guard scheme == "https" || (scheme == "http" && allowInsecure) else {
            throw Refusal(description: allowInsecure ? "the endpoint must be http or https" : "the endpoint must be https")
        }
        if allowInsecure { return url }
        let addresses: [[UInt8]]
        do {
            addresses = try await resolve(host.trimmingCharacters(in: ["[", "]"]))
        } catch {
            throw Refusal(description: "the endpoint's host \(host) cannot be resolved")
        }
        guard !addresses.isEmpty else { throw Refusal(description: "the endpoint's host \(host) cannot be resolved") }
        for address in addresses where !Self.isPublic(address) {
            throw Refusal(description: "the endpoint's host \(host) is not a public address")
        }
        return url
    }

    /// Whether an address (4 or 16 bytes) is a public unicast one.
    static func isPublic(_ address: [UInt8]) -> Bool {
        if address.count == 4 {
            let (a, b) = (address[0], address[1])
            switch a {
            case 0, 10, 127: return false
            case 100 where (64...127).contains(b): return false  // carrier-grade NAT
            case 169 where b == 254: return false  // link-local
            case 172 where (16...31).contains(b): return false
            case 192 where b == 168: return false
            case 192 where b == 0 && address[2] == 0: return false  // IETF protocol assignments
            case 198 where b == 18 || b == 19: return false  // benchmarking
            case 224...255: return false  // multicast, reserved, broadcast
            default: return true
            }
        }
        guard address.count == 16 else { return false }
        if address.allSatisfy({ $0 == 0 }) { return false }  // ::
        if address[0..<15].allSatisfy({ $0 == 0 }) && address[15] == 1 { return false }  // ::1
        if address[0..<10].allSatisfy({ $0 == 0 }) && address[10] == 0xFF && address[11] == 0xFF {
            return isPublic(Array(address[12..<16]))  // IPv4-mapped
        }
        if address[0..<12].allSatisfy({ $0 == 0 }) { return false }  // IPv4-compatible (deprecated)
        if address[0] & 0xFE == 0xFC { return false }  // unique local fc00::/7
        if address[0] == 0xFE && address[1] & 0xC0 == 0x80 { return false }  // link-local fe80::/10
        if address[0] == 0xFF { return false }  // multicast
        if address[0] == 0x20 && address[1] == 0x01 && address[2] == 0x0D && address[3] == 0xB8 { return false }  // documentation
        if address[0] == 0x00 && address[1] == 0x64 && address[2] == 0xFF && address[3] == 0x9B {
            return isPublic(Array(address[12..<16]))  // NAT64 of an IPv4 address
        }
        return true
    }

    /// The system resolver (getaddrinfo), run on NIO's blocking-work pool so that no request thread waits on DNS.
    static func systemResolve(_ host: String) async throws -> [[UInt8]] {
        try await NIOThreadPool.singleton.runIfActive {
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var result: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(host, nil, &hints, &result) == 0, let first = result else {
                throw Refusal(description: "cannot resolve \(host)")
            }
            defer { freeaddrinfo(first) }
            var addresses: [[UInt8]] = []
            var cursor: UnsafeMutablePointer<addrinfo>? = first
            while let entry = cursor {
                if let address = entry.pointee.ai_addr {
                    switch Int32(address.pointee.sa_family) {
                    case AF_INET:
                        address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                            var raw = pointer.pointee.sin_addr
                            addresses.append(withUnsafeBytes(of: &raw) { Array($0) })
                        }
                    case AF_INET6:
                        address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                            var raw = pointer.pointee.sin6_addr
                            addresses.append(withUnsafeBytes(of: &raw) { Array($0) })
                        }
                    default: break
                    }
                }
                cursor = entry.pointee.ai_next
            }
            return addresses
        }
    }
}
