// Module SymorvaKit.
