import SymorvaFeatureKit

extension AccountModuleFactory {
    /// The directory: the account's ``AccountDirectory``, always built (the public room
    /// directory's joins and publishing need it); its member directory answers only when the
    /// manifest enables the directory module. No tables.
    public static let directory = AccountModuleFactory(name: "directory") { context in
        AccountDirectory(
            userID: context.userID, requester: context.requester, services: context.services, scope: context.scope,
            isMemberDirectoryEnabled: context.configuration.modules.directory.isEnabled, tracer: context.tracer)
    }
}
