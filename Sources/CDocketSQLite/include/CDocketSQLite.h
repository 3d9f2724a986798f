#ifndef C_DOCKET_SQLITE_H
#define C_DOCKET_SQLITE_H

/// Bytes of a statement or savepoint journal that SQLite keeps in memory before it moves the journal to a temporary
/// file (SQLITE_CONFIG_STMTJRNL_SPILL; SQLite's default is 65536). At most 131071: on a spill SQLite writes what it
/// kept (up to this many bytes) to the new file in one call, and its Unix file layer writes at most 0x1ffff bytes
/// per call (`seekAndWriteFd`): 131072 or more fails the spill with SQLITE_FULL.
#define DOCKET_SQLITE_STATEMENT_JOURNAL_SPILL 131071

/// What setting DOCKET_SQLITE_STATEMENT_JOURNAL_SPILL returned: 0 (SQLITE_OK) when set. It is set when the program
/// is loaded, before any thread starts and before SQLite is first used (the only time SQLite takes it).
int docket_sqlite_statement_journal_spill_result(void);

/// Sets the spill threshold, for the copy of SQLite that SQLiteNIO links. Returns 0 (SQLITE_OK) when set, SQLite's
/// error code otherwise (21, SQLITE_MISUSE, once the library is in use). `sqlite3_config` takes a variable argument
/// list, which Swift cannot call.
int docket_sqlite_set_statement_journal_spill(int bytes);

#endif
