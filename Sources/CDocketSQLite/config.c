#include "CDocketSQLite.h"

// The copy of SQLite that SQLiteNIO builds (its symbols prefixed `sqlite_nio_`); declared here rather than through
// its header, which only SQLiteNIO's own targets see. Both values are SQLite's (sqlite3.h).
extern int sqlite_nio_sqlite3_config(int option, ...);
#define DOCKET_SQLITE_CONFIG_STMTJRNL_SPILL 26

int docket_sqlite_set_statement_journal_spill(int bytes) {
    return sqlite_nio_sqlite3_config(DOCKET_SQLITE_CONFIG_STMTJRNL_SPILL, bytes);
}
