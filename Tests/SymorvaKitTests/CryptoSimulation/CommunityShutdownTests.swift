import Foundation
import SymorvaTesting
import Testing

@testable import SymorvaKit

/// A community that shuts down releases its accounts: their modules stop and their databases
/// close. (Before, the account database stayed open — the modules were kept alive in a cycle
/// through the factories' list of built modules, and shutdown never stopped the running
/// sessions — and the long crypto simulation ran out of file descriptors after ~380 seeds.)
@Suite("Community shutdown")
struct CommunityShutdownTests {
    final class Weak: @unchecked Sendable { weak var value: AnyObject? }

    #if os(Linux)
        /// The files under `folder` this process has open.
        static func openFiles(under folder: String) -> [String] {
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            return fds.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)") }
                .filter { $0.hasPrefix(folder) }
        }

        @Test("After shutdown the account's modules are released and its database files are closed")
        func databaseClosed() async throws {
            let folder = NSTemporaryDirectory() + "symorva-shutdown-\(UUID().uuidString)"
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let server = SimHomeserver(seed: 1, faults: .init(dropPercent: 0, duplicatePercent: 0, delayPercent: 0))
            let user = "@u0:\(SimHomeserver.serverName)"
            server.register(user: user, deviceID: "D0A")
            let chat = Weak()
            let database = Weak()
            do {
                let device = SimDevice(user: user, deviceID: "D0A", directory: folder + "/D0A", server: server)
                try await device.create()
                guard case .running(let context)? = device.community?.sessions.active.value else {
                    Issue.record("the account is not running")
                    return
                }
                chat.value = context.modules.module(AccountChat.self)
                database.value = context.database
                #expect(!Self.openFiles(under: folder).isEmpty, "the account database is open while it runs")
                await device.stop()
            }
            // Releasing is asynchronous (cancelled tasks drop their references as they end):
            // wait for it, bounded.
            let deadline = ContinuousClock.now + TestWaiting.defaultTimeout
            while ContinuousClock.now < deadline, !Self.openFiles(under: folder).isEmpty {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(Self.openFiles(under: folder).isEmpty, "still open: \(Self.openFiles(under: folder))")
            #expect(chat.value == nil && database.value == nil, "the account's modules outlived the community")
        }
    #endif
}
