import SymorvaMachines
import SymorvaMatrix

/// Typed reads from a manifest's JSON, each failing with the field path it was reading.
///
/// A path is a list of keys (and `[n]` indices) rendered as `modules.wallet.assets[0].code`.
struct ManifestReader {
    let root: JSONValue

    static func render(_ path: [String]) -> String {
        path.isEmpty
            ? "(root)"
            : path.reduce(into: "") { text, part in
                text += part.hasPrefix("[") || text.isEmpty ? part : "." + part
            }
    }

    /// The value at the last component of `path` inside `container`; `nil` when absent.
    func value(at path: [String], in container: [String: JSONValue]) -> JSONValue? {
        guard let key = path.last else { return .object(container) }
        return container[key]
    }

    func required(at path: [String], in container: [String: JSONValue]) throws(ConfigurationError) -> JSONValue {
        guard let value = value(at: path, in: container), value != .null else {
            throw .missingField(Self.render(path))
        }
        return value
    }

    func typeMismatch(_ path: [String], expected: String, found: JSONValue) -> ConfigurationError {
        .invalidField(Self.render(path), reason: "expected \(expected), found \(found.typeName)")
    }

    func object(at path: [String]) throws(ConfigurationError) -> [String: JSONValue] {
        guard case .object(let object) = root else { throw typeMismatch(path, expected: "an object", found: root) }
        return object
    }

    func object(at path: [String], in container: [String: JSONValue]) throws(ConfigurationError)
        -> [String: JSONValue]
    {
        let value = try required(at: path, in: container)
        guard case .object(let object) = value else { throw typeMismatch(path, expected: "an object", found: value) }
        return object
    }

    func optionalObject(at path: [String], in container: [String: JSONValue]) throws(ConfigurationError)
        -> [String: JSONValue]?
    {
        guard let value = value(at: path, in: container), value != .null else { return nil }
        guard case .object(let object) = value else { throw typeMismatch(path, expected: "an object", found: value) }
        return object
    }

    func string(at path: [String], in container: [String: JSONValue]) throws(ConfigurationError) -> String {
        let value = try required(at: path, in: container)
        guard case .string(let string) = value else { throw typeMismatch(path, expected: "a string", found: value) }
        return string
    }

    func nonEmptyString(at path: [String], in container: [String: JSONValue]) throws(ConfigurationError) -> String {
        let string = try string(at: path, in: container)
        guard string.contains(where: { !$0.isWhitespace }) else {
            throw .invalidField(Self.render(path), reason: "must not be empty")
        }
        return string
    }

    func optionalString(at path: [String], in container: [String: JSONValue]) throws(ConfigurationError) -> String? {
        guard let value = value(at: path, in: container), value != .null else { return nil }
        guard case .string(let string) = value else { throw typeMismatch(path, expected: "a string", found: value) }
        return string
    }

    func optionalBool(at path: [String], in container: [String: JSONValue]) throws(ConfigurationError) -> Bool? {
        guard let value = value(at: path, in: container), value != .null else { return nil }
        guard case .bool(let bool) = value else { throw typeMismatch(path, expected: "a boolean", found: value) }
        return bool
    }

    /// Every module listed, known or future, is an object with a boolean `enabled`.
    func checkModuleSwitches(in modules: [String: JSONValue]) throws(ConfigurationError) {
        for name in modules.keys.sorted() {
            let path = ["modules", name]
            let module = try object(at: path, in: modules)
            _ = try bool(at: path + ["enabled"], in: module)
        }
    }

    func integer(at path: [String], in container: [String: JSONValue]) throws(ConfigurationError) -> Int {
        let value = try required(at: path, in: container)
        guard let integer = value.integerValue else { throw typeMismatch(path, expected: "an integer", found: value) }
        return integer
    }

    func bool(at path: [String], in container: [String: JSONValue]) throws(ConfigurationError) -> Bool {
        let value = try required(at: path, in: container)
        guard case .bool(let bool) = value else { throw typeMismatch(path, expected: "a boolean", found: value) }
        return bool
    }

    /// `modules.<name>`: absent means disabled; present needs `enabled`.
    func moduleSwitch(_ name: String, in modules: [String: JSONValue]) throws(ConfigurationError)
        -> SymorvaConfiguration.ModuleSwitch
    {
        let path = ["modules", name]
        guard let module = try optionalObject(at: path, in: modules) else { return .init(isEnabled: false) }
        return .init(isEnabled: try bool(at: path + ["enabled"], in: module))
    }

    /// `modules.wallet`: `assets` is optional (default empty); each asset has a unique code and
    /// a precision.
    func wallet(in modules: [String: JSONValue]) throws(ConfigurationError) -> SymorvaConfiguration.Wallet {
        let path = ["modules", "wallet"]
        guard let wallet = try optionalObject(at: path, in: modules) else { return .init(isEnabled: false, assets: []) }
        let enabled = try bool(at: path + ["enabled"], in: wallet)
        let assetsPath = path + ["assets"]
        guard let list = value(at: assetsPath, in: wallet), list != .null else {
            return .init(isEnabled: enabled, assets: [])
        }
        guard case .array(let items) = list else { throw typeMismatch(assetsPath, expected: "an array", found: list) }
        var assets: [SymorvaConfiguration.Asset] = []
        for (index, item) in items.enumerated() {
            let itemPath = assetsPath + ["[\(index)]"]
            guard case .object(let asset) = item else {
                throw typeMismatch(itemPath, expected: "an object", found: item)
            }
            let code = try string(at: itemPath + ["code"], in: asset)
            guard (2...12).contains(code.count), code.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) })
            else {
                throw .invalidField(Self.render(itemPath + ["code"]), reason: "2–12 upper-case letters or digits")
            }
            guard !assets.contains(where: { $0.code == code }) else {
                throw .invalidField(Self.render(itemPath + ["code"]), reason: "duplicate asset code \(code)")
            }
            let precision = try integer(at: itemPath + ["precision"], in: asset)
            guard (0...18).contains(precision) else {
                throw .invalidField(Self.render(itemPath + ["precision"]), reason: "must be between 0 and 18")
            }
            assets.append(.init(code: code, precision: precision))
        }
        return .init(isEnabled: enabled, assets: assets)
    }
}
