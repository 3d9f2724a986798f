import Foundation

/// Who is asking: the authenticated user with their roles, or the system itself (bootstrap, demo data).
struct Caller: Sendable, Equatable {
    var userID: String
    var userName: String
    var displayName: String
    var roles: Set<String>
    /// The user's time zone (`sys_user.time_zone`, an IANA name); display values of dates use it.
    var timeZoneName: String = ""
    /// The enterprises (`sys_enterprise` sys_ids) where the user is staff of a site: the domains whose records of
    /// scoped tables (those with a `sys_domain` field) the caller may see at all.
    var domains: Set<String> = []
    /// The enterprise of the caller's active context (an ETO site login), which narrows ``domains`` to it and is
    /// where the caller's new scoped records go; nil without one.
    var activeDomain: String? = nil

    /// The domains the caller works in now: the active one, else all of them.
    var visibleDomains: Set<String> {
        guard let activeDomain else { return domains }
        return domains.contains(activeDomain) ? [activeDomain] : []
    }

    /// The user's time zone, or nil for UTC.
    var timeZone: TimeZone? {
        timeZoneName.isEmpty ? nil : TimeZone(identifier: timeZoneName)
    }

    var isAdmin: Bool { roles.contains("admin") }

    func hasAnyRole(_ required: Set<String>) -> Bool {
        required.isEmpty || !roles.isDisjoint(with: required)
    }

    /// The engine acting on its own behalf; passes every access rule.
    static let system = Caller(userID: "system", userName: "system", displayName: "System", roles: ["admin"])
}
