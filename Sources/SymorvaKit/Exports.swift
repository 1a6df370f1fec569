// `import SymorvaKit` is enough to embed the SDK: the product surface speaks in the machines'
// value types (`RoomID`, `MessageContent`, `TransferFailure`, …) and the runtime's `Secret` and
// `ObservableValue`, so both modules come with it. Code that builds its own machines on the
// runtime imports `SymorvaRuntime` itself, as before.
@_exported import SymorvaMachines
@_exported import SymorvaRuntime
