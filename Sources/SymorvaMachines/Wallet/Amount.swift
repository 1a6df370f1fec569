/// An exact quantity of money: an integer count of minor units at a fixed decimal precision.
///
/// Money is never a floating-point number in SymorvaKit: `0.1 + 0.2` must be `0.3`, and a
/// ledger must be able to add up to the last unit. An `Amount` stores `2500` minor units at
/// precision `2` for "25.00". It is never negative: it is a quantity to move, not a balance
/// delta. Two amounts are equal only when both their units and their precision are equal
/// ("25.0" and "25.00" are different values that compare as the same number); ordering is
/// numeric first, then by precision, so it stays consistent with `==`.
public struct Amount: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The largest precision an amount may have. Eighteen decimals cover every asset we know
    /// of (ether has 18) and keep cross-precision comparison inside `Int128`.
    public static let maximumPrecision = 18

    /// The amount in minor units: `2500` for "25.00" at precision 2.
    public let minorUnits: Int64
    /// How many decimal digits follow the point: `2` for most fiat currencies, `0` for points.
    public let precision: Int

    /// Creates an amount from minor units.
    ///
    /// - Throws: ``AmountError/negative`` for a negative count and
    ///   ``AmountError/invalidPrecision(_:)`` outside `0...18`.
    public init(minorUnits: Int64, precision: Int) throws(AmountError) {
        guard (0...Self.maximumPrecision).contains(precision) else { throw .invalidPrecision(precision) }
        guard minorUnits >= 0 else { throw .negative }
        self.minorUnits = minorUnits
        self.precision = precision
    }

    /// Parses a decimal written the way a member types it, keeping the precision written:
    /// `Amount("25.00")` has precision 2, `Amount("7")` precision 0.
    ///
    /// Use ``Asset/amount(_:)-(Amount)`` or ``init(_:precision:)`` to bring it to an asset's precision.
    /// - Throws: the same errors as ``init(_:precision:)``.
    public init(_ text: String) throws(AmountError) {
        let digits = try Self.split(text)
        guard digits.fraction.count <= Self.maximumPrecision else {
            throw .tooManyDecimals(precision: Self.maximumPrecision)
        }
        try self.init(parsed: digits, precision: digits.fraction.count)
    }

    /// Parses a decimal at exactly `precision`: "25", "25.5" and "25.50" all become 2550 minor
    /// units at precision 2.
    ///
    /// The grammar is deliberately narrow: ASCII digits, at most one `.` with digits on both
    /// sides. No sign, no exponent, no grouping separators, no whitespace.
    /// - Throws: ``AmountError/empty``, ``AmountError/negative``, ``AmountError/exponent``,
    ///   ``AmountError/invalidCharacter(offset:)``, ``AmountError/tooManyDecimals(precision:)``,
    ///   ``AmountError/outOfRange`` or ``AmountError/invalidPrecision(_:)``.
    public init(_ text: String, precision: Int) throws(AmountError) {
        guard (0...Self.maximumPrecision).contains(precision) else { throw .invalidPrecision(precision) }
        let digits = try Self.split(text)
        guard digits.fraction.count <= precision else { throw .tooManyDecimals(precision: precision) }
        try self.init(parsed: digits, precision: precision)
    }

    /// A zero amount at `precision`.
    public static func zero(precision: Int) throws(AmountError) -> Amount {
        try Amount(minorUnits: 0, precision: precision)
    }

    /// The amount written with exactly ``precision`` decimals: "25.00", "0.05", "7".
    public var formatted: String {
        guard precision > 0 else { return String(minorUnits) }
        let scale = Self.powerOfTen(precision)
        let whole = minorUnits / scale
        let fraction = String(minorUnits % scale)
        let padding = String(repeating: "0", count: precision - fraction.count)
        return "\(whole).\(padding)\(fraction)"
    }

    /// Same as ``formatted``. Amounts are safe to show; whether to log them is the caller's call.
    public var description: String { formatted }

    /// Whether the amount is zero.
    public var isZero: Bool { minorUnits == 0 }

    /// The sum of two amounts of the same precision.
    ///
    /// - Throws: ``AmountError/precisionMismatch(_:_:)`` or ``AmountError/outOfRange`` on overflow.
    public func adding(_ other: Amount) throws(AmountError) -> Amount {
        guard precision == other.precision else { throw .precisionMismatch(precision, other.precision) }
        let (sum, overflow) = minorUnits.addingReportingOverflow(other.minorUnits)
        guard !overflow else { throw .outOfRange }
        return try Amount(minorUnits: sum, precision: precision)
    }

    /// The difference of two amounts of the same precision.
    ///
    /// - Throws: ``AmountError/precisionMismatch(_:_:)``, or ``AmountError/negative`` when
    ///   `other` is larger.
    public func subtracting(_ other: Amount) throws(AmountError) -> Amount {
        guard precision == other.precision else { throw .precisionMismatch(precision, other.precision) }
        guard other.minorUnits <= minorUnits else { throw .negative }
        return try Amount(minorUnits: minorUnits - other.minorUnits, precision: precision)
    }

    /// The same number at another precision, without losing a digit.
    ///
    /// Raising precision always works unless it overflows; lowering it works only when the
    /// dropped digits are zeros ("25.50" → "25.5", never "25.55" → "25.5").
    /// - Throws: ``AmountError/tooManyDecimals(precision:)`` when digits would be lost,
    ///   ``AmountError/outOfRange`` or ``AmountError/invalidPrecision(_:)``.
    public func rescaled(to newPrecision: Int) throws(AmountError) -> Amount {
        guard (0...Self.maximumPrecision).contains(newPrecision) else { throw .invalidPrecision(newPrecision) }
        if newPrecision >= precision {
            let (scaled, overflow) = minorUnits.multipliedReportingOverflow(
                by: Self.powerOfTen(newPrecision - precision))
            guard !overflow else { throw .outOfRange }
            return try Amount(minorUnits: scaled, precision: newPrecision)
        }
        let divisor = Self.powerOfTen(precision - newPrecision)
        guard minorUnits % divisor == 0 else { throw .tooManyDecimals(precision: newPrecision) }
        return try Amount(minorUnits: minorUnits / divisor, precision: newPrecision)
    }

    /// Whether two amounts denote the same number, whatever their precision.
    public func isNumericallyEqual(to other: Amount) -> Bool {
        scaledValue(to: Self.maximumPrecision) == other.scaledValue(to: Self.maximumPrecision)
    }

    public static func < (lhs: Amount, rhs: Amount) -> Bool {
        let left = lhs.scaledValue(to: maximumPrecision)
        let right = rhs.scaledValue(to: maximumPrecision)
        if left != right { return left < right }
        return lhs.precision < rhs.precision
    }

    // MARK: - Parsing

    private struct Digits {
        var whole: Substring.UTF8View
        var fraction: Substring.UTF8View
    }

    private init(parsed digits: Digits, precision: Int) throws(AmountError) {
        var units: Int64 = 0
        for byte in digits.whole { units = try Self.append(byte, to: units) }
        for byte in digits.fraction { units = try Self.append(byte, to: units) }
        for _ in digits.fraction.count..<precision { units = try Self.append(UInt8(ascii: "0"), to: units) }
        try self.init(minorUnits: units, precision: precision)
    }

    private static func split(_ text: String) throws(AmountError) -> Digits {
        guard !text.isEmpty else { throw .empty }
        let bytes = Substring(text).utf8
        if bytes.first == UInt8(ascii: "-") { throw .negative }
        var point: Substring.UTF8View.Index?
        for (offset, index) in zip(0..., bytes.indices) {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                continue
            case UInt8(ascii: "."):
                guard point == nil else { throw .invalidCharacter(offset: offset) }
                point = index
            case UInt8(ascii: "e"), UInt8(ascii: "E"):
                throw .exponent
            default:
                throw .invalidCharacter(offset: offset)
            }
        }
        guard let point else { return Digits(whole: bytes, fraction: bytes[bytes.endIndex...]) }
        let whole = bytes[..<point]
        let fraction = bytes[bytes.index(after: point)...]
        // "5." and ".5" are refused: a member who typed them may have meant something else.
        if whole.isEmpty { throw .invalidCharacter(offset: 0) }
        if fraction.isEmpty { throw .invalidCharacter(offset: whole.count) }
        return Digits(whole: whole, fraction: fraction)
    }

    private static func append(_ digit: UInt8, to units: Int64) throws(AmountError) -> Int64 {
        let (shifted, overflow) = units.multipliedReportingOverflow(by: 10)
        guard !overflow else { throw .outOfRange }
        let (sum, carry) = shifted.addingReportingOverflow(Int64(digit - UInt8(ascii: "0")))
        guard !carry else { throw .outOfRange }
        return sum
    }

    private func scaledValue(to target: Int) -> Int128 {
        var value = Int128(minorUnits)
        for _ in precision..<target { value *= 10 }
        return value
    }

    private static func powerOfTen(_ exponent: Int) -> Int64 {
        var result: Int64 = 1
        for _ in 0..<exponent { result *= 10 }
        return result
    }
}

/// Why a text or a computation does not give a valid ``Amount``.
public enum AmountError: Error, Sendable, Hashable {
    /// The text is empty.
    case empty
    /// The text or the result is below zero; amounts to move are never negative.
    case negative
    /// The text uses an exponent ("1e3"); members type plain decimals, and exponents hide size.
    case exponent
    /// A character other than an ASCII digit or one `.` between digits, at this UTF-8 offset.
    case invalidCharacter(offset: Int)
    /// More decimals than the asset's precision allows: "25.001" for a 2-decimal asset.
    case tooManyDecimals(precision: Int)
    /// The value does not fit in 64 bits of minor units.
    case outOfRange
    /// A precision outside `0...18`.
    case invalidPrecision(Int)
    /// Arithmetic between amounts of different precision; rescale one of them first.
    case precisionMismatch(Int, Int)
}

/// A currency or token the wallet holds: its code and its decimal precision.
public struct Asset: Sendable, Hashable, CustomStringConvertible {
    /// The asset's code as the wallet service names it: `EUR`, `USDC`, `SYM`.
    public let code: String
    /// How many decimals the asset's amounts carry.
    public let precision: Int

    /// Creates an asset. The precision is clamped by ``Amount/maximumPrecision`` when amounts
    /// are made, so an asset with a larger one cannot hold any amount.
    public init(code: String, precision: Int) {
        self.code = code
        self.precision = precision
    }

    /// Parses `text` at this asset's precision ("25" → "25.00" for EUR).
    public func amount(_ text: String) throws(AmountError) -> Amount {
        try Amount(text, precision: precision)
    }

    /// Brings `amount` to this asset's precision without losing a digit.
    ///
    /// - Throws: ``AmountError/tooManyDecimals(precision:)`` when `amount` has significant
    ///   digits beyond the asset's precision.
    public func amount(_ amount: Amount) throws(AmountError) -> Amount {
        try amount.rescaled(to: precision)
    }

    /// The asset code.
    public var description: String { code }
}
