import SymorvaRuntime
import Testing

@Suite("SYMORVA_LOG")
struct LogLevelEnvironmentTests {
    @Test("Names every level, in any case, blanks ignored")
    func names() {
        for level in LogLevel.allCases {
            #expect(LogLevel(name: level.description) == level)
            #expect(LogLevel(name: " \(level.description.uppercased())\t") == level)
        }
        #expect(LogLevel(name: "verbose") == nil)
        #expect(LogLevel(name: "") == nil)
    }

    @Test("The shared center's threshold: the named level, else warning")
    func threshold() {
        #expect(LogCenter.threshold(environmentValue: "debug") == .debug)
        #expect(LogCenter.threshold(environmentValue: "TRACE") == .trace)
        #expect(LogCenter.threshold(environmentValue: nil) == .warning)
        #expect(LogCenter.threshold(environmentValue: "loud") == .warning)
    }
}
