import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaRuntime

extension AccountModuleFactory {
    /// The meetings factory with the stage members' media engine `engine` makes (from the
    /// account's transport and the community's tracer): the account's ``AccountMeetings`` when
    /// the manifest enables meetings. No tables: meetings live on the services. The umbrella's
    /// `AccountModuleFactory.meetings` passes the platform's engine.
    package static func meetingsModule(
        engine: @escaping @Sendable (_ transport: any HTTPTransport, _ tracer: Tracer) -> any MediaEngine
    ) -> AccountModuleFactory {
        AccountModuleFactory(name: "meetings") { context in
            guard context.configuration.modules.meetings.isEnabled else { return nil }
            return AccountMeetings(
                member: context.userID, services: context.services, scope: context.scope,
                engine: engine(context.services.transport, context.tracer),
                clock: context.clock, wallClock: context.wallClock, tracer: context.tracer)
        }
    }
}

extension AccountMeetings: AccountModule {
    /// Nothing more to release: the scope's end already left every meeting.
    public func stop() async {}
}
