// Module SymorvaREPL.
