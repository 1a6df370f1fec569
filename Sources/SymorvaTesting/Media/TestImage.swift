/// Small images for media tests and benchmarks, made without an image library.
public enum TestImage {
    /// An RGB PNG of `width` × `height` pixels, a diagonal gradient (so a thumbnailer has
    /// something to scale): uncompressed ("stored") deflate blocks, valid for any decoder. With
    /// `alpha`, RGBA: the left half opaque, the right half fading out towards its edge.
    public static func png(width: Int, height: Int, alpha: Bool = false) -> [UInt8] {
        precondition(width > 0 && height > 0, "TestImage.png needs a positive size")
        var raw: [UInt8] = []
        raw.reserveCapacity((width * (alpha ? 4 : 3) + 1) * height)
        for y in 0..<height {
            raw.append(0)  // filter: none
            for x in 0..<width {
                raw.append(UInt8(truncatingIfNeeded: x * 255 / max(1, width - 1)))
                raw.append(UInt8(truncatingIfNeeded: y * 255 / max(1, height - 1)))
                raw.append(UInt8(truncatingIfNeeded: (x + y) & 0xFF))
                if alpha {
                    raw.append(x < width / 2 ? 255 : UInt8(255 - (x - width / 2) * 255 / max(1, width - width / 2)))
                }
            }
        }
        var header: [UInt8] = []
        header += bigEndian(UInt32(width)) + bigEndian(UInt32(height))
        // 8 bits, truecolour (with alpha: 6), deflate, no filter, no interlace
        header += [8, alpha ? 6 : 2, 0, 0, 0]
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
            + chunk("IHDR", header) + chunk("IDAT", zlibStored(raw)) + chunk("IEND", [])
    }

    /// The width and height a PNG's header states, or `nil` when `bytes` is not a PNG.
    public static func pngSize(_ bytes: [UInt8]) -> (width: Int, height: Int)? {
        guard bytes.count >= 24, bytes.starts(with: [0x89, 0x50, 0x4E, 0x47]) else { return nil }
        func word(_ at: Int) -> Int { bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        return (word(16), word(20))
    }

    private static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + data
        return bigEndian(UInt32(data.count)) + typed + bigEndian(crc32(typed))
    }

    private static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let count = min(65_535, data.count - offset)
            let last: UInt8 = offset + count == data.count ? 1 : 0
            out.append(last)
            out += [UInt8(count & 0xFF), UInt8(count >> 8), UInt8(~count & 0xFF), UInt8((~count >> 8) & 0xFF)]
            out += data[offset..<offset + count]
            offset += count
        } while offset < data.count
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        return out + bigEndian(b << 16 | a)
    }

    private static func crc32(_ data: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in data {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }
}
