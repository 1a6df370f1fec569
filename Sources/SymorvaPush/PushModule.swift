import SymorvaFeatureKit

extension AccountModuleFactory {
    /// Push: the account's ``AccountPush`` (its pusher host, rules, pushed events). No tables:
    /// the pusher lives on the homeserver, the profile tag in the data folder.
    public static let push = AccountModuleFactory(name: "push") { context in
        AccountPush(
            userID: context.userID, requester: context.requester, services: context.services, scope: context.scope,
            tracer: context.tracer)
    }
}
