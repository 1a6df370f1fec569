// Module SymorvaTransport.
