#include "sqlite_db.h"

#include <string>
#include <utility>

#include "strata/common/logging.h"

namespace strata::jobs {

Status SqliteError(int rc, sqlite3* db, std::string_view context) {
  // The connection's message describes its last failure; fall back to the code's text.
  const char* text =
      db != nullptr && sqlite3_extended_errcode(db) == rc ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string message = "sqlite: " + std::string(text) + " (" + std::string(context) + ")";
  switch (rc) {
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_UNIQUE:
      return Status(StatusCode::kAlreadyExists, std::move(message));
    default:
      break;
  }
  switch (rc & 0xff) {
    case SQLITE_CANTOPEN:
    case SQLITE_NOTADB:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return InvalidArgumentError(std::move(message));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return UnavailableError(std::move(message));
    case SQLITE_FULL:
      return ResourceExhaustedError(std::move(message));
    case SQLITE_CORRUPT:
      return DataLossError(std::move(message));
    default:
      return InternalError(std::move(message));
  }
}

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), stmt_(other.stmt_), bind_rc_(other.bind_rc_) {
  other.stmt_ = nullptr;
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::Bind(int index, int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Statement& Statement::BindText(int index, std::string_view text) {
  const int rc =
      sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Statement& Statement::BindTextOrNull(int index, std::string_view text) {
  if (!text.empty()) return BindText(index, text);
  const int rc = sqlite3_bind_null(stmt_, index);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Statement& Statement::BindBlob(int index, std::string_view bytes) {
  // A zero-length blob (not NULL) for empty content: the data pointer must not be null.
  static const char kEmpty = 0;
  const int rc = sqlite3_bind_blob64(stmt_, index, bytes.empty() ? &kEmpty : bytes.data(),
                                     bytes.size(), SQLITE_TRANSIENT);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

StatusOr<bool> Statement::Step() {
  if (bind_rc_ != SQLITE_OK) return SqliteError(bind_rc_, nullptr, "binding a parameter");
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Status status = SqliteError(rc, db_, sqlite3_sql(stmt_));
  // Leaves the statement ready to finalize; a failed step is reported once, above.
  sqlite3_reset(stmt_);
  return status;
}

Status Statement::Run() {
  while (true) {
    STRATA_ASSIGN_OR_RETURN(const bool row, Step());
    if (!row) return OkStatus();
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_rc_ = SQLITE_OK;
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }

std::string Statement::Text(int column) const {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (text == nullptr) return "";
  return std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::string Statement::Blob(int column) const {
  const auto* data = static_cast<const char*>(sqlite3_column_blob(stmt_, column));
  if (data == nullptr) return "";
  return std::string(data, static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

StatusOr<std::unique_ptr<Db>> Db::Open(const std::string& path) {
  if (path.empty()) return InvalidArgumentError("the job store needs a database path");
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status status = SqliteError(rc, db, "opening " + path);
    sqlite3_close(db);  // a handle comes back even on failure (null only without memory)
    return status;
  }
  sqlite3_extended_result_codes(db, 1);
  return std::unique_ptr<Db>(new Db(db));
}

Db::~Db() { sqlite3_close(db_); }

StatusOr<Statement> Db::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return SqliteError(rc, db_, sql);
  return Statement(db_, stmt);
}

Status Db::Exec(const char* sql) {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteError(rc, db_, sql);
  return OkStatus();
}

StatusOr<int64_t> Db::QueryInt(std::string_view sql) {
  STRATA_ASSIGN_OR_RETURN(Statement statement, Prepare(sql));
  STRATA_ASSIGN_OR_RETURN(const bool row, statement.Step());
  if (!row) return InternalError("sqlite: no row from " + std::string(sql));
  return statement.Int(0);
}

int64_t Db::Changes() const { return sqlite3_changes64(db_); }

StatusOr<Transaction> Transaction::Begin(Db& db) {
  STRATA_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  return Transaction(&db);
}

Transaction::~Transaction() {
  if (!open_ || !db_->InTransaction()) return;
  if (Status status = db_->Exec("ROLLBACK"); !status.ok()) {
    LogWarn("job store: rollback failed", {{"error", status.message()}});
  }
}

Status Transaction::Commit() {
  STRATA_RETURN_IF_ERROR(db_->Exec("COMMIT"));
  open_ = false;
  return OkStatus();
}

}  // namespace strata::jobs
