import SymorvaMachines

/// The adapter that shows the consent sheet and returns the member's answer.
///
/// Every grant request goes through it first (``AccountStudio/requestGrant(for:scope:)``): the
/// sheet says what would be shared, with whom and for how long. An app presents it in its own
/// design (``/SymorvaMachines/ConsentSheet/text`` is an English default). A presenter that
/// cannot ask anyone answers ``/SymorvaMachines/ConsentAnswer/unavailable``; never approve on
/// the member's behalf.
public protocol ConsentPresenter: Sendable {
    /// Shows `sheet` and returns the member's answer.
    func present(_ sheet: ConsentSheet) async -> ConsentAnswer
}

/// The presenter of a device that cannot ask: every grant request fails with
/// ``StudioError/consentUnavailable`` and nothing is asked of the service.
public struct UnavailableConsentPresenter: ConsentPresenter {
    /// Creates the presenter.
    public init() {}

    public func present(_ sheet: ConsentSheet) async -> ConsentAnswer { .unavailable }
}

/// A presenter that answers with a closure: for tools and tests that ask in their own way.
public struct ClosureConsentPresenter: ConsentPresenter {
    private let answer: @Sendable (ConsentSheet) async -> ConsentAnswer

    /// Creates a presenter that answers with `answer`.
    public init(_ answer: @escaping @Sendable (ConsentSheet) async -> ConsentAnswer) {
        self.answer = answer
    }

    public func present(_ sheet: ConsentSheet) async -> ConsentAnswer { await answer(sheet) }
}
