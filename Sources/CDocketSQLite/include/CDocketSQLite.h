#ifndef C_DOCKET_SQLITE_H
#define C_DOCKET_SQLITE_H

/// Sets the size up to which SQLite keeps a statement or savepoint journal in memory before it spills to a
/// temporary file (SQLITE_CONFIG_STMTJRNL_SPILL), for the copy of SQLite that SQLiteNIO links. Takes effect only
/// before the library is first used in the process: returns 0 (SQLITE_OK) when set, SQLite's error code otherwise
/// (21, SQLITE_MISUSE, once the library is in use). `sqlite3_config` takes a variable argument list, which Swift
/// cannot call.
int docket_sqlite_set_statement_journal_spill(int bytes);

#endif
