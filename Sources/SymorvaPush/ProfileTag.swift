import Foundation
import SymorvaFeatureKit
import SymorvaMachines

/// The installation's pusher profile tag: 16 alphanumerics, generated the first time it is
/// needed and kept in the data folder (`push-profile-tag`, 0600) for the installation's
/// lifetime, whichever account signs in. Another installation (another data folder) gets its
/// own. The homeserver uses it to pick the push rules of a device profile.
package struct InstallationProfileTag: Sendable {
    /// The tag file.
    package let path: String

    /// The tag of the installation whose data folder is `dataDirectory`.
    package init(dataDirectory: String) {
        path = (dataDirectory as NSString).appendingPathComponent("push-profile-tag")
    }

    /// The kept tag, created now when there is none (or the file does not hold a valid one).
    package func value() throws(PushError) -> String {
        if let data = FileManager.default.contents(atPath: path),
            let text = String(data: data, encoding: .utf8)?.trimmingCharacters(in: .whitespacesAndNewlines),
            Self.isValid(text)
        {
            return text
        }
        let tag = Self.generate()
        do throws(AccountStorageError) {
            try AccountFiles.writeAtomically(Array((tag + "\n").utf8), to: path)
        } catch {
            throw .storage("\(error)")
        }
        return tag
    }

    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

    /// 16 random alphanumerics from the system's generator.
    static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        return String((0..<16).map { _ in alphabet.randomElement(using: &generator)! })
    }

    /// Whether `text` is 16 ASCII alphanumerics.
    package static func isValid(_ text: String) -> Bool {
        text.utf8.count == 16 && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
    }
}
