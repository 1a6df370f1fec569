// `import SymorvaKit` is enough to embed the SDK. The umbrella re-exports the public surface of
// the modules it composes: the session feature (`SymorvaSession`), the product modules
// (`SymorvaChat`, `SymorvaWallet`, meetings, the studio, directory, push, E2EE) and the bridge
// between encryption and the others (`SymorvaEncryptionBridge`), what every feature module is built on (`SymorvaFeatureKit`: the
// manifest, account modules), what apps see of the machines — the states they observe
// (`SyncState`, `TransferState`, `MeetingState`, …) and the values (`RoomID`, `Amount`,
// `TransferFailure`, …), never a machine's events or effects —, the runtime's `Secret` and
// `ObservableValue`, and the seams an app may plug into (`HTTPTransport`, `KeyProvider`, the
// meetings' `MediaEngine`). Internals that modules share are `package` (the machines, their
// events and effects, the crypto driver and libolm's types, the REPL), so re-exporting shows
// none of them; `Scripts/public-api-count` counts what it shows.
@_exported import SymorvaAIStudio
@_exported import SymorvaChat
@_exported import SymorvaChatStore
@_exported import SymorvaCrypto
@_exported import SymorvaCryptoDriver
@_exported import SymorvaDirectory
@_exported import SymorvaE2EE
@_exported import SymorvaEncryptionBridge
@_exported import SymorvaFeatureKit
@_exported import SymorvaHTTP
@_exported import SymorvaMachines
@_exported import SymorvaMeetings
@_exported import SymorvaPush
@_exported import SymorvaRuntime
@_exported import SymorvaSession
@_exported import SymorvaWallet

#if os(Linux)
    @_exported import SymorvaMediaGStreamer
#endif
