import SymorvaRuntime

/// The address of a piece of media on a homeserver: `mxc://<server-name>/<media-id>`.
///
/// Events name their images and files by it; the media client turns it into an authenticated
/// download. A media ID is not a secret, but it is the handle of what a member sent: the
/// description shows the server name only.
public struct MediaURI: Hashable, Sendable, CustomStringConvertible, LogSafe {
    /// The server that holds the media (`example.org`, `localhost:8448`).
    public let serverName: String
    /// The server's ID for the media: letters, digits, `_` and `-` (the spec's grammar).
    public let mediaID: String

    /// Reads an `mxc://` URI; `nil` unless it has a server name and a media ID of the spec's
    /// characters.
    public init?(_ text: String) {
        guard text.hasPrefix("mxc://") else { return nil }
        let rest = text.dropFirst("mxc://".count)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        self.init(serverName: String(rest[..<slash]), mediaID: String(rest[rest.index(after: slash)...]))
    }

    /// A URI from its parts; `nil` when either is empty or holds a character the spec does not
    /// allow there (a media ID is `[A-Za-z0-9_-]+`, so it can go into a path as is).
    package init?(serverName: String, mediaID: String) {
        guard !serverName.isEmpty, !mediaID.isEmpty,
            serverName.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") }),
            mediaID.utf8.allSatisfy(Self.isMediaIDByte)
        else { return nil }
        self.serverName = serverName
        self.mediaID = mediaID
    }

    /// `mxc://<server-name>/<media-id>`.
    public var uriString: String { "mxc://\(serverName)/\(mediaID)" }

    /// `mxc://<server-name>/…`: the media ID is left out.
    public var description: String { "mxc://\(serverName)/…" }
    /// Same as ``description``.
    public var logDescription: String { description }

    private static func isMediaIDByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default: false
        }
    }
}
