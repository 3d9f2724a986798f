/// Docket's version, as `docket --version` and `docketd --version` print it: the step of the plan the code base has
/// reached (docs and release notes name steps), and `-dev` while that step is under way.
public enum DocketVersion {
    public static let current = "0.19.0-dev"
}
