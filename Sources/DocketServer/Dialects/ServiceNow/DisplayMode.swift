/// `sysparm_display_value`: raw values, display values, or both.
enum DisplayMode: Sendable {
    case value
    case display
    case all

    init(parameter: String?) {
        switch parameter?.lowercased() {
        case "true": self = .display
        case "all": self = .all
        default: self = .value
        }
    }
}
