import SymorvaFeatureKit
import Testing

/// Factories declare the modules they need; the community builds them in the order those
/// declarations give, not in the order of the list, and refuses a list that cannot be built
/// (issue 23).
@Suite("Account module order")
struct AccountModuleOrderTests {
    static func factory(_ name: String, requires: [String] = [], uses: [String] = []) -> AccountModuleFactory {
        AccountModuleFactory(name: name, requires: requires, uses: uses) { _ in nil }
    }

    static func names(_ factories: [AccountModuleFactory]) throws(AccountModuleGraphError) -> [String] {
        try AccountModuleFactory.ordered(factories).map(\.name)
    }

    @Test("A list that already satisfies its declarations keeps its order")
    func keepsOrder() throws {
        let list = [
            Self.factory("crypto"), Self.factory("chat", uses: ["crypto"]), Self.factory("wallet"),
            Self.factory("studio", uses: ["crypto"]),
        ]
        #expect(try Self.names(list) == ["crypto", "chat", "wallet", "studio"])
    }

    @Test("A list in the wrong order is built in the declared order, the rest keeping theirs")
    func wrongOrder() throws {
        let list = [
            Self.factory("studio", uses: ["crypto"]), Self.factory("wallet"), Self.factory("chat", uses: ["crypto"]),
            Self.factory("push", requires: ["chat"]), Self.factory("crypto"),
        ]
        #expect(try Self.names(list) == ["wallet", "crypto", "studio", "chat", "push"])
    }

    @Test("A module used but not listed is no error: the user is built without it")
    func usedButAbsent() throws {
        #expect(
            try Self.names([Self.factory("chat", uses: ["crypto"]), Self.factory("wallet")]) == ["chat", "wallet"])
    }

    @Test("A required module that is not listed is refused, naming both")
    func missingRequirement() {
        #expect(throws: AccountModuleGraphError.missingRequirement(module: "push", requires: "chat")) {
            try AccountModuleFactory.ordered([Self.factory("crypto"), Self.factory("push", requires: ["chat"])])
        }
    }

    @Test("A cycle is refused, naming the circle")
    func cycle() {
        let list = [
            Self.factory("wallet"), Self.factory("a", requires: ["b"]), Self.factory("b", uses: ["c"]),
            Self.factory("c", uses: ["a"]),
        ]
        #expect(throws: AccountModuleGraphError.cycle(["a", "b", "c", "a"])) {
            try AccountModuleFactory.ordered(list)
        }
        #expect(throws: AccountModuleGraphError.cycle(["a", "a"])) {
            try AccountModuleFactory.ordered([Self.factory("a", uses: ["a"])])
        }
    }

    @Test("A name listed twice is refused")
    func duplicate() {
        #expect(throws: AccountModuleGraphError.duplicateName("chat")) {
            try AccountModuleFactory.ordered([Self.factory("chat"), Self.factory("crypto"), Self.factory("chat")])
        }
    }

    @Test("The errors name the modules")
    func descriptions() {
        #expect(
            AccountModuleGraphError.missingRequirement(module: "push", requires: "chat").description
                == "module 'push' requires 'chat', not listed")
        #expect(AccountModuleGraphError.cycle(["a", "b", "a"]).description.hasSuffix("a → b → a"))
    }
}
