import SymorvaFeatureKit

extension AccountChat: AccountModule {}
