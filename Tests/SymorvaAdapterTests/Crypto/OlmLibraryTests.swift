import SymorvaCrypto
import Testing

@Suite("libolm")
struct OlmLibraryTests {
    @Test("The linked libolm is a 3.x release, the API the E2EE driver is written against")
    func version() {
        let version = OlmLibrary.version
        #expect(version.major == 3)
        #expect(version.minor >= 2)
        #expect(OlmLibrary.versionString == "\(version.major).\(version.minor).\(version.patch)")
    }
}
