import Foundation

/// Finds an executable product of this package built beside the running tests, so that tests
/// can run the real program (`symorva`) as a child process.
package enum BuiltExecutable {
    /// The executable `name` from the test process's build folder (`.build/<triple>/debug/`),
    /// or `nil` when it was not built. `filePath` locates the package root as a last resort.
    package static func url(named name: String, filePath: String = #filePath) -> URL? {
        var directories: [URL] = []
        if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.append(URL(fileURLWithPath: executable).deletingLastPathComponent())
        }
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            directories.append(bundle.bundleURL.deletingLastPathComponent())
        }
        directories.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent())
        if let root = try? ChartLocator.packageRoot(from: filePath) {
            directories.append(root.appendingPathComponent(".build/debug"))
        }
        return directories.map { $0.appendingPathComponent(name) }.first {
            FileManager.default.isExecutableFile(atPath: $0.path)
        }
    }
}
