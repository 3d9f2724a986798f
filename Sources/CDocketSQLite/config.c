#include "CDocketSQLite.h"

// The copy of SQLite that SQLiteNIO builds (its symbols prefixed `sqlite_nio_`), linked into every product that
// links DocketServer; declared here rather than through its header, which only SQLiteNIO's own targets see. Both
// values are SQLite's (sqlite3.h).
extern int sqlite_nio_sqlite3_config(int option, ...);
#define DOCKET_SQLITE_CONFIG_STMTJRNL_SPILL 26

static int statement_journal_spill_result = -1;

int docket_sqlite_set_statement_journal_spill(int bytes) {
    return sqlite_nio_sqlite3_config(DOCKET_SQLITE_CONFIG_STMTJRNL_SPILL, bytes);
}

// `sqlite3_config` must come before SQLite's first use and is not thread-safe: at load time nothing has used SQLite
// and no other thread runs.
__attribute__((constructor)) static void docket_sqlite_configure(void) {
    statement_journal_spill_result = docket_sqlite_set_statement_journal_spill(DOCKET_SQLITE_STATEMENT_JOURNAL_SPILL);
}

int docket_sqlite_statement_journal_spill_result(void) {
    return statement_journal_spill_result;
}
