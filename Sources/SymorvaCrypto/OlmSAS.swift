import COlm
import SymorvaCryptoDriver
import SymorvaRuntime

// libolm's `olm/sas.h`: the SAS key agreement of interactive verification (`m.sas.v1`).

extension OlmCryptoDriver {
    package func newSAS() throws(CryptoDriverError) -> any SASSession {
        try OlmSASObject()
    }
}

/// An `OlmSAS`: a fresh Curve25519 key pair and, once the peer's key is set, the shared secret.
final class OlmSASObject: SASSession {
    let memory: OlmMemory
    let pointer: OpaquePointer
    let publicKey: String

    init() throws(CryptoDriverError) {
        let memory = OlmMemory(olm_sas_size())
        let pointer: OpaquePointer = olm_sas(memory.base)
        let random = try RandomBytes(olm_create_sas_random_length(pointer))
        if olm_create_sas(pointer, random.pointer, random.count) == olm_error() {
            let code = olm_sas_last_error_code(pointer)
            _ = olm_clear_sas(pointer)
            throw OlmError.map(code)
        }
        var output = [UInt8](repeating: 0, count: olm_sas_pubkey_length(pointer))
        if olm_sas_get_pubkey(pointer, &output, output.count) == olm_error() {
            let code = olm_sas_last_error_code(pointer)
            _ = olm_clear_sas(pointer)
            throw OlmError.map(code)
        }
        self.memory = memory
        self.pointer = pointer
        publicKey = String(decoding: output, as: UTF8.self)
    }

    deinit { _ = olm_clear_sas(pointer) }

    var hasTheirKey: Bool { olm_sas_is_their_key_set(pointer) != 0 }

    func setTheirKey(_ key: String) throws(CryptoDriverError) {
        // libolm decodes the key in place: it gets a copy. A key of the wrong length is refused
        // here (libolm would read past a short buffer's decoded bytes).
        guard key.utf8.count == olm_sas_pubkey_length(pointer), (try? Ed25519Check.keyBytes(key)) != nil else {
            throw .malformedKey
        }
        var bytes = Array(key.utf8)
        guard olm_sas_set_their_key(pointer, &bytes, bytes.count) != olm_error() else {
            throw OlmError.map(olm_sas_last_error_code(pointer))
        }
    }

    func generateBytes(info: String, count: Int) throws(CryptoDriverError) -> [UInt8] {
        guard hasTheirKey else { throw .malformedKey }
        var output = [UInt8](repeating: 0, count: count)
        let infoBytes = Array(info.utf8)
        guard olm_sas_generate_bytes(pointer, infoBytes, infoBytes.count, &output, output.count) != olm_error() else {
            throw OlmError.map(olm_sas_last_error_code(pointer))
        }
        return output
    }

    func mac(_ input: String, info: String, encoding: SASMACEncoding) throws(CryptoDriverError) -> String {
        guard hasTheirKey else { throw .malformedKey }
        let inputBytes = Array(input.utf8)
        let infoBytes = Array(info.utf8)
        var output = [UInt8](repeating: 0, count: olm_sas_mac_length(pointer))
        let result =
            switch encoding {
            case .fixedBase64:
                olm_sas_calculate_mac_fixed_base64(
                    pointer, inputBytes, inputBytes.count, infoBytes, infoBytes.count, &output, output.count)
            case .legacyBase64:
                olm_sas_calculate_mac(
                    pointer, inputBytes, inputBytes.count, infoBytes, infoBytes.count, &output, output.count)
            }
        guard result != olm_error() else { throw OlmError.map(olm_sas_last_error_code(pointer)) }
        // The MAC is base64 without padding; libolm leaves the buffer's tail as it was (zeros).
        return String(decoding: output.prefix { $0 != 0 }, as: UTF8.self)
    }
}
