import SymorvaMachines
import Testing

/// Exact decimal amounts: parsing what members type, formatting, arithmetic and ordering.
@Suite("Amount")
struct AmountTests {
    let euro = Asset(code: "EUR", precision: 2)

    // MARK: Parsing

    @Test(
        "Decimals within the asset's precision parse exactly",
        arguments: [
            ("25.00", Int64(2500)), ("25", 2500), ("25.5", 2550), ("0.01", 1), ("0", 0), ("007.10", 710),
            ("92233720368547758.07", Int64.max),
        ])
    func parses(text: String, minorUnits: Int64) throws {
        let amount = try euro.amount(text)
        #expect(amount == (try Amount(minorUnits: minorUnits, precision: 2)))
    }

    @Test("The precision written is kept when no asset is given")
    func inferredPrecision() throws {
        #expect(try Amount("25.00") == Amount(minorUnits: 2500, precision: 2))
        #expect(try Amount("7") == Amount(minorUnits: 7, precision: 0))
        #expect(try Amount("0.000000000000000001") == Amount(minorUnits: 1, precision: 18))
    }

    @Test(
        "Malformed text is refused with a typed reason",
        arguments: [
            ("", AmountError.empty), ("-1", .negative), ("-0.50", .negative), ("1e3", .exponent),
            ("2.5E2", .exponent), ("25.001", .tooManyDecimals(precision: 2)), ("+1", .invalidCharacter(offset: 0)),
            (" 1", .invalidCharacter(offset: 0)), ("1 ", .invalidCharacter(offset: 1)),
            ("1,000", .invalidCharacter(offset: 1)), ("1.2.3", .invalidCharacter(offset: 3)),
            (".5", .invalidCharacter(offset: 0)), ("5.", .invalidCharacter(offset: 1)),
            ("٣", .invalidCharacter(offset: 0)), ("0x10", .invalidCharacter(offset: 1)),
            ("nan", .invalidCharacter(offset: 0)), ("92233720368547758.08", .outOfRange),
            ("99999999999999999999", .outOfRange),
        ])
    func refuses(text: String, error: AmountError) {
        #expect(throws: error) { try euro.amount(text) }
    }

    @Test("Precision outside 0...18 is refused")
    func invalidPrecision() {
        #expect(throws: AmountError.invalidPrecision(19)) { try Amount("1", precision: 19) }
        #expect(throws: AmountError.invalidPrecision(-1)) { try Amount(minorUnits: 1, precision: -1) }
        #expect(throws: AmountError.negative) { try Amount(minorUnits: -1, precision: 2) }
        #expect(throws: AmountError.tooManyDecimals(precision: 18)) { try Amount("0.0000000000000000001") }
    }

    // MARK: Formatting

    @Test(
        "Amounts format with exactly their precision",
        arguments: [
            (Int64(2500), 2, "25.00"), (5, 2, "0.05"), (7, 0, "7"), (1, 18, "0.000000000000000001"),
            (Int64.max, 2, "92233720368547758.07"), (0, 3, "0.000"),
        ])
    func formats(minorUnits: Int64, precision: Int, text: String) throws {
        let amount = try Amount(minorUnits: minorUnits, precision: precision)
        #expect(amount.formatted == text)
        #expect(amount.description == text)
        #expect(try Amount(text, precision: precision) == amount)
    }

    // MARK: Arithmetic

    @Test("Adding and subtracting is exact where floating point is not")
    func exactArithmetic() throws {
        let tenth = try euro.amount("0.10")
        let fifth = try euro.amount("0.20")
        #expect(try tenth.adding(fifth) == euro.amount("0.30"))
        #expect(try euro.amount("25.10").subtracting(euro.amount("0.10")) == euro.amount("25.00"))
        #expect(try euro.amount("1").subtracting(euro.amount("1")).isZero)
    }

    @Test("Overflow, negative results and mixed precisions are refused")
    func arithmeticErrors() throws {
        let max = try Amount(minorUnits: Int64.max, precision: 2)
        let cent = try euro.amount("0.01")
        #expect(throws: AmountError.outOfRange) { try max.adding(cent) }
        #expect(throws: AmountError.negative) { try cent.subtracting(euro.amount("0.02")) }
        #expect(throws: AmountError.precisionMismatch(2, 0)) { try cent.adding(Amount("1")) }
        #expect(throws: AmountError.precisionMismatch(2, 3)) { try cent.subtracting(Amount("1.000")) }
    }

    @Test("Rescaling never loses a digit")
    func rescaling() throws {
        #expect(try Amount("25.5").rescaled(to: 2) == euro.amount("25.50"))
        #expect(try Amount("25.50").rescaled(to: 1) == Amount("25.5"))
        #expect(throws: AmountError.tooManyDecimals(precision: 1)) { try Amount("25.55").rescaled(to: 1) }
        #expect(throws: AmountError.outOfRange) { try Amount("92233720368547758").rescaled(to: 3) }
        #expect(try euro.amount(Amount("25")) == euro.amount("25.00"))
        #expect(throws: AmountError.tooManyDecimals(precision: 2)) { try euro.amount(Amount("0.001")) }
    }

    // MARK: Ordering

    @Test("Amounts order numerically across precisions, consistently with equality")
    func ordering() throws {
        let a = try Amount("25.0")
        let b = try Amount("25.00")
        let c = try Amount("25.01")
        let d = try Amount("3")
        #expect(a != b)
        #expect(a.isNumericallyEqual(to: b))
        #expect(a < b)
        #expect(b < c)
        #expect(d < a)
        #expect([c, b, d, a].sorted() == [d, a, b, c])
        #expect(!(b < b))
        let huge = try Amount(minorUnits: Int64.max, precision: 0)
        let tiny = try Amount(minorUnits: Int64.max, precision: 18)
        #expect(tiny < huge)
    }
}
