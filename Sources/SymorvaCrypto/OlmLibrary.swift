import COlm

/// The libolm the SDK is linked with: what the end-to-end encryption driver (the E2EE issue)
/// builds on, and what `docs/security.md` will pin.
package enum OlmLibrary {
    /// libolm's version, as the library reports it (`olm_get_library_version`).
    package static var version: (major: Int, minor: Int, patch: Int) {
        var major: UInt8 = 0
        var minor: UInt8 = 0
        var patch: UInt8 = 0
        olm_get_library_version(&major, &minor, &patch)
        return (Int(major), Int(minor), Int(patch))
    }

    /// The version as `major.minor.patch`.
    package static var versionString: String {
        let version = version
        return "\(version.major).\(version.minor).\(version.patch)"
    }
}
