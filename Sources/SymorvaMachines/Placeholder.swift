// Module SymorvaMachines.
