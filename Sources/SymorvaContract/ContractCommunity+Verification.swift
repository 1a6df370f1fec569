import SymorvaKit
import SymorvaMatrix

extension ContractCommunity {
    /// Interactive device verification of the active account (`verification.*`) over
    /// ``AccountCrypto/verify(_:device:startDirectly:)``, ``AccountCrypto/incomingVerification``
    /// and ``SASVerification``: a flow is a handle (`verification-N`) of the account it was made
    /// for; its state is the path `verification.state` (the emoji and decimals when both devices
    /// show the code, the outcome: `verified` or `cancelled` with the spec's code); an incoming
    /// request is the path `verification.incoming`, whose value carries the flow's handle.
    /// Errors are in the domain `verification` (``KeyVerificationError``'s cases), `notReady`
    /// when no account with encryption is active.
    ///
    /// Each person's choice is one method (`accept`, `startSAS`, `confirm`, `mismatch`,
    /// `cancel`); another way to compare (QR codes) adds its own methods and state kinds.
    var verificationMethods: ContractMethods {
        let community = community
        let crypto: @Sendable () throws(ContractError) -> AccountCrypto = { () throws(ContractError) in
            guard let crypto = community.module(AccountCrypto.self) else {
                throw ContractError(
                    domain: "verification", code: "notReady",
                    message: "No signed-in account with end-to-end encryption is active.")
            }
            return crypto
        }
        var methods = ContractMethods()
        methods.asynchronous["verification.start"] = { [weak self] call in
            let userID = try call.params.userID("userID")
            let device = try call.params.optionalString("deviceID").map(DeviceID.init)
            let startDirectly = try call.params.optionalBool("startDirectly") ?? false
            if startDirectly, device == nil {
                throw ContractError.invalidParams("deviceID", "a device ID (startDirectly needs one)")
            }
            let crypto = try crypto()
            let account = self?.activeUserID
            let flow = try await mapping("verification") {
                try await crypto.verify(userID, device: device, startDirectly: startDirectly)
            }
            return Self.verification(flow, call.handles.issue(flow, kind: "verification", account: account))
        }
        let actions: [(String, @Sendable (SASVerification) async -> Void)] = [
            ("verification.accept", { await $0.accept() }), ("verification.startSAS", { await $0.startSAS() }),
            ("verification.confirm", { await $0.confirm() }), ("verification.mismatch", { await $0.mismatch() }),
            ("verification.cancel", { await $0.cancel() }),
        ]
        for (name, action) in actions {
            methods.asynchronous[name] = { call in
                await action(try Self.flow(call))
                return .object([:])
            }
        }
        methods.subscriptions["verification.state"] = { call in
            ContractSource(try Self.flow(call).state, encode: Self.verificationState)
        }
        // The last request another device made, of the account active when subscribed; each
        // value names the flow by its handle (the same flow is always the same handle).
        methods.subscriptions["verification.incoming"] = { [weak self] call in
            let account = self?.activeUserID
            let handles = call.handles
            return ContractSource(try crypto().incomingVerification) { flow in
                flow.map { Self.verification($0, handles.issue($0, kind: "verification", account: account)) } ?? .null
            }
        }
        return methods
    }

    private static func flow(_ call: ContractCall) throws(ContractError) -> SASVerification {
        try call.handles.resolve(
            call.params, "verification", kind: "verification", as: SASVerification.self, domain: "verification")
    }

    static func verification(_ flow: SASVerification, _ handle: String) -> JSONValue {
        .object([
            "verification": .string(handle), "transactionID": .string(flow.transactionID),
            "otherUserID": .string(flow.otherUserID.rawValue),
            "otherDeviceID": flow.otherDeviceID.map { .string($0.rawValue) } ?? .null,
            "state": verificationState(flow.state.value),
        ])
    }

    static func verificationState(_ state: SASVerificationState) -> JSONValue {
        switch state {
        case .requested: .object(["kind": "requested"])
        case .incoming: .object(["kind": "incoming"])
        case .ready: .object(["kind": "ready"])
        case .exchangingKeys: .object(["kind": "exchangingKeys"])
        case .showingCode(let emoji, let decimals):
            .object([
                "kind": "showingCode",
                "emoji": .array(
                    emoji.map { .object(["character": .string($0.character), "description": .string($0.description)]) }),
                "decimals": .array(decimals.map { .int($0) }),
            ])
        case .confirmed: .object(["kind": "confirmed"])
        case .otherDeviceScanned: .object(["kind": "otherDeviceScanned"])
        case .verified: .object(["kind": "verified"])
        case .cancelled(let code, let byUs): .object(["kind": "cancelled", "code": .string(code), "byUs": .bool(byUs)])
        }
    }
}
