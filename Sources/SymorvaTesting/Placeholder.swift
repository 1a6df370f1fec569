// Module SymorvaTesting.
