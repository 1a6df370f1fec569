/// Why a list of module factories cannot be built for an account.
public enum AccountModuleGraphError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Two factories have the same name (the name keys the built modules and the schema rows).
    case duplicateName(String)
    /// `module` requires `requires`, which is not in the list.
    case missingRequirement(module: String, requires: String)
    /// The modules depend on one another in a circle (each requires or uses the next; the
    /// last the first).
    case cycle([String])

    /// The error, with the modules' names.
    public var description: String {
        switch self {
        case .duplicateName(let name): "module '\(name)' is listed twice"
        case .missingRequirement(let module, let requires): "module '\(module)' requires '\(requires)', not listed"
        case .cycle(let modules): "modules depend on one another in a circle: \(modules.joined(separator: " → "))"
        }
    }
}

extension AccountModuleFactory {
    /// `factories` in the order they are built: every factory after the ones it
    /// ``requires`` and the listed ones it ``uses``; otherwise in the order given (a list that
    /// already satisfies its declarations is returned as it is).
    ///
    /// - Throws: ``AccountModuleGraphError`` when two factories share a name, a required module
    ///   is not listed, or the declarations form a cycle.
    public static func ordered(_ factories: [AccountModuleFactory]) throws(AccountModuleGraphError)
        -> [AccountModuleFactory]
    {
        var names: Set<String> = []
        for factory in factories where !names.insert(factory.name).inserted {
            throw .duplicateName(factory.name)
        }
        for factory in factories {
            if let missing = factory.requires.first(where: { !names.contains($0) }) {
                throw .missingRequirement(module: factory.name, requires: missing)
            }
        }
        // Stable: each round takes the first factory in the given order whose dependencies are built.
        var pending = factories
        var ordered: [AccountModuleFactory] = []
        var placed: Set<String> = []
        while !pending.isEmpty {
            guard
                let next = pending.firstIndex(where: { factory in
                    factory.dependencies(among: names).allSatisfy(placed.contains)
                })
            else { throw .cycle(cycle(in: pending, names: names)) }
            let factory = pending.remove(at: next)
            placed.insert(factory.name)
            ordered.append(factory)
        }
        return ordered
    }

    /// What must be built before this factory, of the modules in `names` (itself included when
    /// it names itself: a circle of one).
    private func dependencies(among names: Set<String>) -> [String] {
        (requires + uses).filter { names.contains($0) }
    }

    /// One circle among `pending` (none of which can be built): follows the first unbuilt
    /// dependency from the first factory until a name comes round again.
    private static func cycle(in pending: [AccountModuleFactory], names: Set<String>) -> [String] {
        let byName = Dictionary(pending.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var path: [String] = []
        var current = pending[0]
        while !path.contains(current.name) {
            path.append(current.name)
            guard
                let next = current.dependencies(among: names).lazy.compactMap({ byName[$0] }).first
            else { break }
            current = next
        }
        let start = path.firstIndex(of: current.name) ?? 0
        return Array(path[start...]) + [current.name]
    }
}
