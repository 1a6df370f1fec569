import SymorvaRuntime

/// A live HLS media playlist (RFC 8216), as much of it as a listener needs: the media sequence,
/// the target duration, and each segment's duration, URI and program date-time.
package struct HLSPlaylist: Sendable, Hashable {
    /// One segment line of the playlist.
    package struct Segment: Sendable, Hashable {
        /// Its media sequence number.
        package let sequence: Int
        /// `#EXTINF`'s duration.
        package let duration: Duration
        /// Its URI as written (relative to the playlist).
        package let uri: String
        /// `#EXT-X-PROGRAM-DATE-TIME`: when its first sample was captured, if the playlist says.
        package let programDate: Timestamp?
    }

    /// `#EXT-X-TARGETDURATION`.
    package let targetDuration: Duration
    /// The segments, oldest first.
    package let segments: [Segment]
    /// `#EXT-X-ENDLIST`: the stream has ended.
    package let ended: Bool

    /// Parses `text`; `nil` when it is not a media playlist.
    package static func parse(_ text: String) -> HLSPlaylist? {
        var lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingWhitespace() }
        guard lines.first == "#EXTM3U" else { return nil }
        lines.removeFirst()
        var sequence = 0
        var target: Duration?
        var pendingDuration: Duration?
        var pendingDate: Timestamp?
        var segments: [Segment] = []
        var ended = false
        for line in lines where !line.isEmpty {
            if let value = line.value(of: "#EXT-X-MEDIA-SEQUENCE:") {
                guard let number = Int(value) else { return nil }
                sequence = number
            } else if let value = line.value(of: "#EXT-X-TARGETDURATION:") {
                guard let seconds = Int(value) else { return nil }
                target = .seconds(seconds)
            } else if let value = line.value(of: "#EXTINF:") {
                let number = value.split(separator: ",", maxSplits: 1).first.map(String.init) ?? value
                guard let seconds = Double(number), seconds >= 0 else { return nil }
                pendingDuration = .milliseconds(Int64((seconds * 1000).rounded()))
            } else if let value = line.value(of: "#EXT-X-PROGRAM-DATE-TIME:") {
                pendingDate = Self.timestamp(value)
            } else if line == "#EXT-X-ENDLIST" {
                ended = true
            } else if !line.hasPrefix("#") {
                guard let duration = pendingDuration else { return nil }
                segments.append(Segment(sequence: sequence, duration: duration, uri: line, programDate: pendingDate))
                sequence += 1
                pendingDuration = nil
                pendingDate = nil
            }
        }
        guard let target else { return nil }
        return HLSPlaylist(targetDuration: target, segments: segments, ended: ended)
    }

    /// `2026-12-01T23:14:53.305Z` (UTC, optional fraction) as a timestamp; `nil` otherwise.
    package static func timestamp(_ text: String) -> Timestamp? {
        let utf8 = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= utf8.count else { return nil }
            var value = 0
            for byte in utf8[range] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard utf8.count >= 20, utf8[4] == 45, utf8[7] == 45, utf8[10] == 84, utf8[13] == 58, utf8[16] == 58,
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var index = 19
        var millis = 0
        if utf8[index] == 46 {
            index += 1
            var digits = 0
            while index < utf8.count, (48...57).contains(utf8[index]) {
                if digits < 3 { millis = millis * 10 + Int(utf8[index] - 48) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            if digits < 3 { for _ in digits..<3 { millis *= 10 } }
        }
        guard index == utf8.count - 1, utf8[index] == 90 else { return nil }  // "Z"
        // Days from the civil date (Howard Hinnant's algorithm).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = Int64(era * 146_097 + doe - 719_468)
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return Timestamp(millisecondsSince1970: seconds * 1000 + Int64(millis))
    }

    /// `uri` resolved against the playlist's path (same folder unless absolute).
    package static func resolve(_ uri: String, relativeTo playlistPath: String) -> String {
        if uri.hasPrefix("/") { return uri }
        guard let slash = playlistPath.lastIndex(of: "/") else { return uri }
        return String(playlistPath[...slash]) + uri
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> String {
        var text = self
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        while let last = text.last, last.isWhitespace { text.removeLast() }
        return String(text)
    }
}

extension String {
    fileprivate func value(of prefix: String) -> String? {
        hasPrefix(prefix) ? String(dropFirst(prefix.count)) : nil
    }
}
