// A small RAII layer over SQLite's C API for the job store (private to src/jobs): a connection,
// prepared statements with bound parameters, and an IMMEDIATE transaction that rolls back unless
// committed. SQL text is always a constant; values only ever travel as bound parameters.
//
// SQLite failures become Status codes: a PRIMARY KEY / UNIQUE conflict is ALREADY_EXISTS (the
// job store relies on it: an INSERT's conflict is how it knows a row was there first); a file
// that cannot be opened, is not a database or is read-only is INVALID_ARGUMENT; a lock held past
// the busy timeout is UNAVAILABLE; a full disk RESOURCE_EXHAUSTED; a corrupt file DATA_LOSS;
// anything else INTERNAL. Messages carry SQLite's own text.
//
// Thread rules: none of these objects is safe to share; the job store serializes every use of a
// Db (and its Statements) under its own mutex.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "strata/common/status.h"

namespace strata::jobs {

// The Status for SQLite result code `rc` (extended codes included); `db` (may be null) supplies
// the message.
Status SqliteError(int rc, sqlite3* db, std::string_view context);

// One prepared statement. Parameters are 1-based, columns 0-based (SQLite's convention).
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  ~Statement();

  // Binding errors (rare: too big, out of memory) are kept and returned by the next Step.
  Statement& Bind(int index, int64_t value);
  Statement& BindText(int index, std::string_view text);
  // NULL for "", the text otherwise (optional columns).
  Statement& BindTextOrNull(int index, std::string_view text);
  Statement& BindBlob(int index, std::string_view bytes);

  // Advances: true with a row ready, false when done.
  StatusOr<bool> Step();
  // Steps to the end, ignoring any rows (INSERT, UPDATE, DELETE, PRAGMA).
  Status Run();
  // Ready to run again with new parameters (all cleared).
  void Reset();

  int64_t Int(int column) const;
  std::string Text(int column) const;  // "" for NULL
  std::string Blob(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  int bind_rc_ = SQLITE_OK;
};

class Db {
 public:
  // Opens (creating when absent) the database at `path` with extended result codes on.
  static StatusOr<std::unique_ptr<Db>> Open(const std::string& path);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  StatusOr<Statement> Prepare(std::string_view sql);
  // Runs constant SQL with no parameters (schema, pragmas, BEGIN/COMMIT); rows are ignored.
  Status Exec(const char* sql);
  // The first column of the first row of constant SQL (a PRAGMA's value, a count).
  StatusOr<int64_t> QueryInt(std::string_view sql);
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int64_t Changes() const;
  // Whether a transaction is open (SQLite ends one itself after some errors).
  bool InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

 private:
  explicit Db(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

// BEGIN IMMEDIATE (takes the write lock now, so a transaction never fails half-way on a lock
// upgrade); rolled back on destruction unless Commit succeeded.
class Transaction {
 public:
  static StatusOr<Transaction> Begin(Db& db);
  Transaction(Transaction&& other) noexcept : db_(other.db_), open_(other.open_) {
    other.open_ = false;
  }
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();
  Status Commit();

 private:
  explicit Transaction(Db* db) : db_(db) {}
  Db* db_;
  bool open_ = true;
};

}  // namespace strata::jobs
