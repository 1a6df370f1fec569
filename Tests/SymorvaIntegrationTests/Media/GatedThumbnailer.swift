import SymorvaChat
import SymorvaRuntime

/// A thumbnailer that holds each call at a gate before handing it to a real one: a test keeps the
/// send queue's thumbnail step running and checks what is true meanwhile (`send()` returned, the
/// echo is shown, the text behind waits), without sleeping. A cancelled call (its queue stopped)
/// leaves the gate at once with no thumbnail.
final class GatedThumbnailer: AttachmentThumbnailer {
    private struct Gate {
        var isOpen = false
        var waiting: [Int: CheckedContinuation<Void, Never>] = [:]
        var next = 0
    }

    private let inner: any AttachmentThumbnailer
    private let gate = Lock(Gate())
    private let callsPublisher = ObservableValue<Int>.Publisher(0)

    /// How many calls reached the gate.
    var calls: ObservableValue<Int> { callsPublisher.observable }

    init(_ inner: any AttachmentThumbnailer) {
        self.inner = inner
    }

    /// Lets every held call, and every later one, through.
    func open() {
        let held = gate.withLock { gate -> [CheckedContinuation<Void, Never>] in
            gate.isOpen = true
            defer { gate.waiting = [:] }
            return Array(gate.waiting.values)
        }
        for continuation in held { continuation.resume() }
    }

    func thumbnail(ofImageAt path: String, contentType: String) async -> AttachmentThumbnail? {
        guard await passGate() else { return nil }
        return await inner.thumbnail(ofImageAt: path, contentType: contentType)
    }

    func thumbnail(ofVideoAt path: String, contentType: String) async -> AttachmentThumbnail? {
        guard await passGate() else { return nil }
        return await inner.thumbnail(ofVideoAt: path, contentType: contentType)
    }

    /// Waits for the gate; `false` when the calling task was cancelled.
    private func passGate() async -> Bool {
        let ticket = gate.withLock { gate -> Int in
            gate.next += 1
            return gate.next
        }
        callsPublisher.update { $0 += 1 }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = gate.withLock { gate -> Bool in
                    if gate.isOpen || Task.isCancelled { return true }
                    gate.waiting[ticket] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            gate.withLock { $0.waiting.removeValue(forKey: ticket) }?.resume()
        }
        return !Task.isCancelled
    }
}
