import Foundation
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Push endpoints are addresses a user chose: docketd sends to them only when they are public HTTPS addresses,
/// never into the network docketd runs in (loopback, private, link-local, carrier-grade NAT, multicast or
/// reserved addresses, IPv4 or IPv6). `--push-allow-insecure-endpoints` admits `http://` and loopback or private
/// addresses (closed networks, tests), never link-local ones (a cloud's metadata service lives there) nor the
/// other metadata addresses. The host is resolved once per check, with a time limit, on a thread pool of its own;
/// every address it names is checked, and the connection goes to the address checked (``Checked``), so that a
/// name that answers differently the second time (DNS rebinding) cannot lead a send elsewhere.
struct EndpointGuard: Sendable {
    struct Refusal: Error, Equatable, CustomStringConvertible {
        let description: String
        /// A refusal that may not hold later (the name did not resolve, or not in time): a send is tried again
        /// rather than the subscription given up.
        var transient = false
    }

    /// An endpoint as checked: its URL, its host, and the address (checked) that docketd connects to.
    struct Checked: Sendable, Equatable {
        let url: URL
        /// The host as the URL names it (brackets removed): for TLS and `Host`.
        let host: String
        /// The address connected to, as text (`93.184.216.34`, `2606:4700::1`).
        let address: String
        /// Whether the URL names its address itself (nothing to pin).
        var isLiteral: Bool { host == address }
    }

    let allowInsecure: Bool
    /// Names resolved for a check (tests replace it).
    var resolve: @Sendable (String) async throws -> [[UInt8]] = EndpointGuard.systemResolve
    /// How long a resolution may take.
    var resolveLimit: Duration = .seconds(3)

    /// The longest endpoint accepted (UnifiedPush: 1000 bytes).
    static let maximumLength = 1000

    func check(_ text: String) async throws(Refusal) -> URL {
        try await pin(text).url
    }

    /// Checks an endpoint and chooses the address to connect to.
    func pin(_ text: String) async throws(Refusal) -> Checked {
        guard text.utf8.count <= Self.maximumLength else { throw Refusal(description: "the endpoint is longer than 1000 bytes") }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty,
            url.user == nil, url.password == nil
        else { throw Refusal(description: "the endpoint must be an absolute http(s) URL without credentials") }
        guard scheme == "https" || (scheme == "http" && allowInsecure) else {
            throw Refusal(description: allowInsecure ? "the endpoint must be http or https" : "the endpoint must be https")
        }
        let bare = host.trimmingCharacters(in: ["[", "]"])
        let addresses: [[UInt8]]
        if let literal = Self.literal(bare) {
            addresses = [literal]
        } else {
            let resolve = self.resolve
            let lookup = Task { () -> Result<[[UInt8]], any Error> in
                do { return .success(try await resolve(bare)) } catch { return .failure(error) }
            }
            guard let result = await value(of: lookup, within: resolveLimit, cancellable: true) else {
                lookup.cancel()
                throw Refusal(description: "the endpoint's host \(host) did not resolve in time", transient: true)
            }
            guard case .success(let found) = result, !found.isEmpty else {
                throw Refusal(description: "the endpoint's host \(host) cannot be resolved", transient: true)
            }
            addresses = found
        }
        for address in addresses {
            if Self.isNeverAllowed(address) {
                throw Refusal(description: "the endpoint's host \(host) is a link-local or metadata address")
            }
            if !allowInsecure && !Self.isPublic(address) {
                throw Refusal(description: "the endpoint's host \(host) is not a public address")
            }
        }
        guard let chosen = Self.text(addresses[0]) else { throw Refusal(description: "the endpoint's host \(host) cannot be resolved") }
        return Checked(url: url, host: Self.literal(bare) == nil ? bare : chosen, address: chosen)
    }

    /// Addresses refused whatever the flags: link-local (where clouds serve instance metadata and credentials), the
    /// metadata services outside it, unspecified, multicast and broadcast.
    static func isNeverAllowed(_ address: [UInt8]) -> Bool {
        if address.count == 4 {
            switch (address[0], address[1]) {
            case (169, 254): return true
            case (100, 100) where address[2] == 100 && address[3] == 200: return true  // Alibaba Cloud's metadata
            case (0, _): return true
            case (224...255, _): return true
            default: return false
            }
        }
        guard address.count == 16 else { return true }
        if address.allSatisfy({ $0 == 0 }) { return true }
        if address[0..<10].allSatisfy({ $0 == 0 }) && address[10] == 0xFF && address[11] == 0xFF {
            return isNeverAllowed(Array(address[12..<16]))
        }
        if address[0] == 0xFE && address[1] & 0xC0 == 0x80 { return true }  // fe80::/10
        if address[0] == 0xFF { return true }  // multicast
        // AWS's IPv6 metadata service, fd00:ec2::254.
        if address == [0xFD, 0, 0x0E, 0xC2] + Array(repeating: 0, count: 10) + [0x02, 0x54] { return true }
        if address[0] == 0x00 && address[1] == 0x64 && address[2] == 0xFF && address[3] == 0x9B {
            return isNeverAllowed(Array(address[12..<16]))
        }
        return false
    }

    /// The bytes of an IP address written as text; nil when it is not one.
    static func literal(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    /// An address (4 or 16 bytes) as text.
    static func text(_ address: [UInt8]) -> String? {
        let family = address.count == 4 ? AF_INET : address.count == 16 ? AF_INET6 : -1
        guard family >= 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let written = address.withUnsafeBytes { bytes in inet_ntop(family, bytes.baseAddress, &buffer, socklen_t(buffer.count)) }
        guard written != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
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

    /// Threads of their own for name resolution: a resolver that hangs holds these, never the pool file reads and
    /// other blocking work share.
    static let resolverPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: lookupLimit)
        pool.start()
        return pool
    }()

    /// Lookups at once on ``resolverPool``: a name whose servers never answer holds a thread until getaddrinfo
    /// gives up, so past this many the next lookup is refused at once (and tried again later) instead of waiting.
    static let lookupLimit = 8
    private static let lookups = ResolverLookups()

    /// The system resolver (getaddrinfo), on ``resolverPool`` so that no request thread waits on DNS; answers are
    /// kept for 30 s (failures for 5 s), so that a push service's name costs one lookup per half minute.
    static func systemResolve(_ host: String) async throws -> [[UInt8]] {
        let now = ContinuousClock.now
        if let known = lookups.answer(for: host, now: now) { return try known.get() }
        guard lookups.begin() else { throw Refusal(description: "too many lookups at once", transient: true) }
        defer { lookups.end() }
        do {
            let found = try await lookUp(host)
            lookups.keep(.success(found), for: host, until: now + .seconds(30))
            return found
        } catch {
            lookups.keep(.failure(Refusal(description: "cannot resolve \(host)", transient: true)), for: host, until: now + .seconds(5))
            throw error
        }
    }

    private static func lookUp(_ host: String) async throws -> [[UInt8]] {
        try await resolverPool.runIfActive {
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

/// The system resolver's recent answers and the lookups under way (``EndpointGuard/systemResolve(_:)``).
final class ResolverLookups: Sendable {
    private let state = Mutex<(answers: [String: (Result<[[UInt8]], EndpointGuard.Refusal>, ContinuousClock.Instant)], running: Int)>(([:], 0))

    func answer(for host: String, now: ContinuousClock.Instant) -> Result<[[UInt8]], EndpointGuard.Refusal>? {
        state.withLock { state in
            guard let (answer, until) = state.answers[host], until > now else { return nil }
            return answer
        }
    }

    func keep(_ answer: Result<[[UInt8]], EndpointGuard.Refusal>, for host: String, until: ContinuousClock.Instant) {
        state.withLock { state in
            if state.answers.count >= 10_000 { state.answers = state.answers.filter { $0.value.1 > .now } }
            if state.answers.count >= 10_000 { state.answers.removeAll() }
            state.answers[host] = (answer, until)
        }
    }

    func begin() -> Bool {
        state.withLock { state in
            guard state.running < EndpointGuard.lookupLimit else { return false }
            state.running += 1
            return true
        }
    }

    func end() { state.withLock { $0.running -= 1 } }
}
