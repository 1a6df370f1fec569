import SymorvaCrypto
import SymorvaFeatureKit
import SymorvaMachines
import SymorvaStore
import Testing

@Suite("Store failures as machines see them")
struct StoreFailureMappingTests {
    @Test("Store and account storage errors map to typed machine-level failures")
    func mapping() {
        let cases: [(AccountStorageError, StoreFailure)] = [
            (.store(.full), .full),
            (.store(.busy), .busy),
            (.store(.corrupt), .corrupt),
            (.store(.newerSchema(found: 4, supported: 3)), .newerSchema),
            (.store(.open(code: 14)), .database),
            (.store(.step(code: 10)), .database),
            (.store(.constraint(code: 1555, message: "UNIQUE constraint failed")), .database),
            (.store(.migration(version: 2, code: 1)), .database),
            (.secrets(.decryptionFailed), .secrets),
            (.fileSystem(operation: "mkdir", errno: 13), .fileSystem),
            (.unreadableRegistry(reason: "not a list"), .unreadable),
            (.unknownAccount, .unknownAccount),
        ]
        for (error, expected) in cases {
            #expect(error.storeFailure == expected, "\(error)")
        }
        #expect(SessionError.store(.secrets).description == "store(secrets)")
    }
}
