// Module SymorvaCrypto.
