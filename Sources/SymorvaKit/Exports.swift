// `import SymorvaKit` is enough to embed the SDK. The umbrella re-exports the public surface of
// the modules it composes: the product modules (`SymorvaChat`, `SymorvaWallet`), what every
// feature module is built on (`SymorvaFeatureKit`: the manifest, account modules), the machines'
// value types (`RoomID`, `MessageContent`, `TransferFailure`, …), the runtime's `Secret` and
// `ObservableValue`, and the seams an app may plug into (`HTTPTransport`, `KeyProvider`).
// Internals that modules share are `package`, so re-exporting shows none of them.
@_exported import SymorvaAIStudio
@_exported import SymorvaChat
@_exported import SymorvaChatStore
@_exported import SymorvaCrypto
@_exported import SymorvaCryptoDriver
@_exported import SymorvaDirectory
@_exported import SymorvaE2EE
@_exported import SymorvaFeatureKit
@_exported import SymorvaHTTP
@_exported import SymorvaMachines
@_exported import SymorvaMeetings
@_exported import SymorvaPush
@_exported import SymorvaRuntime
@_exported import SymorvaWallet

#if os(Linux)
    @_exported import SymorvaMediaGStreamer
#endif
