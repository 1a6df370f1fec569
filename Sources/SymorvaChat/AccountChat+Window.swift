import SymorvaChatStore
import SymorvaMachines
import SymorvaRuntime

/// Rows `range` of the conversation list and how many rows the whole list has: what a screen
/// showing 20 rows of 10,000 conversations needs, without building the other 9,980.
///
/// The rows are those ``ConversationList`` shows at the same positions: conversations joined or
/// invited to, pinned ones first, then by latest activity (two conversations with the same
/// activity time are ordered by display name within a window and by room ID across its edge).
public struct ConversationWindow: Sendable, Hashable {
    /// The rows asked for (the list may have fewer: ``items`` then ends early).
    public var range: Range<Int>
    /// The conversations of those rows, in display order.
    public var items: [ConversationListItem]
    /// How many rows the whole list has (for a scroll bar, or to know what to ask for next).
    public var total: Int
    /// Whether the window is read from the store yet; `.signedOut` while nobody is signed in.
    public var status: ConversationList.Status

    /// A window.
    public init(range: Range<Int>, items: [ConversationListItem] = [], total: Int = 0, status: ConversationList.Status)
    {
        self.range = range
        self.items = items
        self.total = total
        self.status = status
    }
}

/// The windows of the list that are observed now, each re-read from the store after every
/// committed sync and every optimistic change.
final class ConversationWindows: Sendable {
    struct Open: Sendable {
        let value: ObservableValue<ConversationWindow>
        let runner: SerialRunner
    }

    let open = Lock<[ObjectIdentifier: Open]>([:])
}

extension AccountChat {
    /// Rows `range` of the conversation list, read from the store when first observed and after
    /// every committed sync while observed: only those rows are built, whatever the size of the
    /// list.
    ///
    /// While an app observes windows and not ``conversations``, the whole list is no longer
    /// rebuilt after each sync (it is again as soon as it is observed).
    ///
    /// ```swift
    /// let firstScreen = chat.conversationWindow(0..<20)
    /// let stop = firstScreen.subscribe { window in render(window.items, of: window.total) }
    /// ```
    public func conversationWindow(_ range: Range<Int>) -> ObservableValue<ConversationWindow> {
        let lower = max(0, range.lowerBound)
        let range = lower..<max(lower, range.upperBound)
        let observable = ObservableValue<ConversationWindow>.Publisher(
            ConversationWindow(range: range, status: .loading)
        ).observable
        // The hooks hold the value weakly: a window nobody keeps goes away with its hooks.
        observable.setHooks(
            .init(
                firstObserver: { [weak self, weak observable] in
                    guard let self, let observable else { return }
                    self.windowObserved(observable)
                },
                lastObserverGone: { [weak self, weak observable] in
                    guard let self, let observable else { return }
                    _ = self.windows.open.withLock { $0.removeValue(forKey: ObjectIdentifier(observable)) }
                }))
        return observable
    }

    /// Whether any window is observed now.
    var hasOpenWindows: Bool { !windows.open.withLock { $0.isEmpty } }

    /// Asks every observed window to read its rows again.
    func reloadWindows() {
        for window in windows.open.withLock({ Array($0.values) }) { window.runner.request() }
    }

    private func windowObserved(_ observable: ObservableValue<ConversationWindow>) {
        let runner = SerialRunner { [weak self, weak observable] in
            guard let self, let observable else { return }
            await self.loadWindow(into: observable)
        }
        windows.open.withLock {
            $0[ObjectIdentifier(observable)] = ConversationWindows.Open(value: observable, runner: runner)
        }
        runner.request()
    }

    private func loadWindow(into observable: ObservableValue<ConversationWindow>) async {
        let range = observable.value.range
        let read: (rows: [ConversationSummary], total: Int)
        do { read = try await store.loadConversationWindow(range) } catch {
            logger.error("conversation window not read error=\(error)")
            return
        }
        var rows = read.rows
        openPreviews(&rows)
        let list = ConversationList.build(rows, ownUserID: userID, overrides: listOverrides)
        let window = ConversationWindow(range: range, items: list.items, total: read.total, status: .loaded)
        if observable.value != window { observable.publish(window) }
    }
}
