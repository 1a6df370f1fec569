// Module SymorvaStore.
