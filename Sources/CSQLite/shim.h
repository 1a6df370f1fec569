#include <sqlite3.h>

/// `sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0)`: the variadic call is not importable into
/// Swift. Turns off SQLite's allocation statistics, which take a global mutex around every
/// `malloc` and `free` SQLite makes. Only effective before SQLite initializes (the first open);
/// returns `SQLITE_MISUSE` afterwards and changes nothing.
static inline int symorva_sqlite3_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
