/// How long the client waits for a sync response (v2 `/sync` and sliding sync alike).
///
/// A live request is held open by the server for its `timeout`, so the client waits that long
/// plus a margin. A request with `timeout=0` (the initial sync, a catch-up from a stored
/// token, a sliding connection's first window) is answered as soon as the server has computed
/// it, and for an account with thousands of rooms that takes minutes on a busy homeserver: a
/// client that gave up after the live margin would ask again and again and never see its
/// first list (measured on Synapse with 6,730 rooms, `docs/benchmarks.md`, "first-list").
enum SyncRequestDeadline {
    /// The margin over the server's hold time of a live request.
    static let liveMargin: Duration = .seconds(30)
    /// How long a computed response (`timeout=0`) may take.
    static let computedResponse: Duration = .seconds(600)

    /// The client-side timeout of a sync request the server may hold for `serverTimeout`.
    static func clientTimeout(serverTimeout: Duration) -> Duration {
        serverTimeout <= .zero ? computedResponse : serverTimeout + liveMargin
    }
}
