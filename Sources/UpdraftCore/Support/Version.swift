/// Which Updraft this is: the release version, and the git commit it was built from when the build
/// ran in a git checkout.
public enum UpdraftVersion {
    /// The release version (semantic versioning); tagged in git as `v<version>`.
    public static let version = "0.10.0"
    /// The full git commit hash the library was built from, or nil when built outside a checkout.
    public static let revision: String? = EmbeddedBuildInfo.revision

    /// `0.10.0 (git 1a2b3c4d5e6f)`, or `0.10.0` without a revision.
    public static var description: String {
        revision.map { "\(version) (git \($0.prefix(12)))" } ?? version
    }
}
