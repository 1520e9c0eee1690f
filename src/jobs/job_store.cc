#include "strata/jobs/job_store.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <utility>

#include "sqlite_db.h"
#include "strata/common/logging.h"

namespace strata::jobs {
namespace {

// Tries at a fresh random id after a primary-key collision (36^24 ids: a second one is
// already a sign of a broken random source).
constexpr int kIdAttempts = 4;
constexpr std::string_view kOutputPurpose = "batch_output";

// Version 1. Ids are UNIQUE text; `seq` (an explicit INTEGER PRIMARY KEY, which VACUUM keeps)
// gives creation order. Lines and results hang off their batch and go with it. A result's
// primary key (batch_id, line_index) is what makes a line's result recorded once. A line's
// `done` is set in the same transaction as its result: the partial index over the lines not
// done lets PendingLines skip the finished part of a large batch without a lookup per line (the
// queries name it with INDEXED BY: without statistics the planner takes the primary key, which
// walks every finished line).
constexpr const char* kSchema = R"sql(
CREATE TABLE files (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  purpose TEXT NOT NULL,
  filename TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  content BLOB NOT NULL,
  owner TEXT NOT NULL DEFAULT ''
);
CREATE INDEX files_by_purpose ON files (purpose, seq);
CREATE TABLE batches (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  endpoint TEXT NOT NULL,
  input_file_id TEXT NOT NULL,
  completion_window TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('validating', 'failed', 'in_progress', 'finalizing',
                                       'completed', 'expired', 'cancelling', 'cancelled')),
  output_file_id TEXT,
  error_file_id TEXT,
  metadata_json TEXT,
  created_at INTEGER NOT NULL DEFAULT 0,
  in_progress_at INTEGER NOT NULL DEFAULT 0,
  expires_at INTEGER NOT NULL DEFAULT 0,
  finalizing_at INTEGER NOT NULL DEFAULT 0,
  completed_at INTEGER NOT NULL DEFAULT 0,
  failed_at INTEGER NOT NULL DEFAULT 0,
  expired_at INTEGER NOT NULL DEFAULT 0,
  cancelling_at INTEGER NOT NULL DEFAULT 0,
  cancelled_at INTEGER NOT NULL DEFAULT 0,
  total INTEGER NOT NULL DEFAULT 0,
  completed INTEGER NOT NULL DEFAULT 0,
  failed INTEGER NOT NULL DEFAULT 0,
  owner TEXT NOT NULL DEFAULT ''
);
CREATE INDEX batches_by_state ON batches (state, seq);
CREATE INDEX batches_by_input ON batches (input_file_id);
CREATE TABLE batch_lines (
  batch_id TEXT NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
  line_index INTEGER NOT NULL,
  custom_id TEXT NOT NULL,
  body TEXT NOT NULL,
  done INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (batch_id, line_index)
) WITHOUT ROWID;
CREATE INDEX batch_lines_pending ON batch_lines (batch_id, line_index) WHERE done = 0;
CREATE TABLE batch_results (
  batch_id TEXT NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
  line_index INTEGER NOT NULL,
  ok INTEGER NOT NULL,
  json TEXT NOT NULL,
  PRIMARY KEY (batch_id, line_index)
) WITHOUT ROWID;
PRAGMA user_version = 2;
)sql";
static_assert(kJobStoreSchemaVersion == 2, "kSchema sets the version it creates");

// From version 1 (no owners): every file and batch it holds has the owner "" (created without
// API keys).
constexpr const char* kMigrateFrom1 = R"sql(
ALTER TABLE files ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE batches ADD COLUMN owner TEXT NOT NULL DEFAULT '';
PRAGMA user_version = 2;
)sql";

constexpr BatchState kAllStates[] = {
    BatchState::kValidating, BatchState::kFailed,  BatchState::kInProgress, BatchState::kFinalizing,
    BatchState::kCompleted,  BatchState::kExpired, BatchState::kCancelling, BatchState::kCancelled,
};

BatchState ParseBatchState(std::string_view name) {
  for (BatchState state : kAllStates) {
    if (BatchStateName(state) == name) return state;
  }
  // The schema's CHECK admits only the names above; a file edited by hand reads as failed.
  return BatchState::kFailed;
}

std::string RandomId(std::mt19937_64& rng, std::string_view prefix) {
  static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

std::string Quoted(std::string_view id) {
  // Appended piecewise: GCC 12 misreads "'" + std::string(...) as an overlapping copy.
  std::string quoted;
  quoted.reserve(id.size() + 2);
  quoted += '\'';
  quoted += id;
  quoted += '\'';
  return quoted;
}

// ---- Files --------------------------------------------------------------------------------

constexpr std::string_view kFileColumns = "id, purpose, filename, bytes, created_at, owner";

FileRecord ReadFile(const Statement& row) {
  FileRecord file;
  file.id = row.Text(0);
  file.purpose = row.Text(1);
  file.filename = row.Text(2);
  file.bytes = row.Int(3);
  file.created_at = row.Int(4);
  file.owner = row.Text(5);
  return file;
}

StatusOr<FileRecord> InsertFile(Db& db, std::mt19937_64& rng, std::string_view purpose,
                                std::string_view filename, std::string_view content, int64_t now,
                                std::string_view owner) {
  STRATA_ASSIGN_OR_RETURN(
      Statement insert,
      db.Prepare("INSERT INTO files (id, purpose, filename, bytes, created_at, content, owner) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
  FileRecord file{.id = "",
                  .purpose = std::string(purpose),
                  .filename = std::string(filename),
                  .bytes = static_cast<int64_t>(content.size()),
                  .created_at = now,
                  .owner = std::string(owner)};
  for (int attempt = 0;; ++attempt) {
    file.id = RandomId(rng, "file-");
    insert.Reset();
    insert.BindText(1, file.id)
        .BindText(2, file.purpose)
        .BindText(3, file.filename)
        .Bind(4, file.bytes)
        .Bind(5, now)
        .BindBlob(6, content)
        .BindText(7, file.owner);
    Status status = insert.Run();
    if (status.ok()) return file;
    if (status.code() != StatusCode::kAlreadyExists || attempt + 1 == kIdAttempts) return status;
  }
}

StatusOr<FileRecord> GetFileLocked(Db& db, std::string_view id) {
  STRATA_ASSIGN_OR_RETURN(Statement select, db.Prepare("SELECT " + std::string(kFileColumns) +
                                                       " FROM files WHERE id = ?1"));
  select.BindText(1, id);
  STRATA_ASSIGN_OR_RETURN(const bool row, select.Step());
  if (!row) return NotFoundError("no file with id " + Quoted(id));
  return ReadFile(select);
}

// ---- Batches ------------------------------------------------------------------------------

constexpr std::string_view kBatchColumns =
    "id, endpoint, input_file_id, completion_window, state, output_file_id, error_file_id, "
    "metadata_json, created_at, in_progress_at, expires_at, finalizing_at, completed_at, "
    "failed_at, expired_at, cancelling_at, cancelled_at, total, completed, failed, owner";

BatchRecord ReadBatch(const Statement& row) {
  BatchRecord batch;
  batch.id = row.Text(0);
  batch.endpoint = row.Text(1);
  batch.input_file_id = row.Text(2);
  batch.completion_window = row.Text(3);
  batch.state = ParseBatchState(row.Text(4));
  batch.output_file_id = row.Text(5);
  batch.error_file_id = row.Text(6);
  batch.metadata_json = row.Text(7);
  batch.created_at = row.Int(8);
  batch.in_progress_at = row.Int(9);
  batch.expires_at = row.Int(10);
  batch.finalizing_at = row.Int(11);
  batch.completed_at = row.Int(12);
  batch.failed_at = row.Int(13);
  batch.expired_at = row.Int(14);
  batch.cancelling_at = row.Int(15);
  batch.cancelled_at = row.Int(16);
  batch.counts.total = row.Int(17);
  batch.counts.completed = row.Int(18);
  batch.counts.failed = row.Int(19);
  batch.owner = row.Text(20);
  return batch;
}

StatusOr<BatchRecord> GetBatchLocked(Db& db, std::string_view id) {
  STRATA_ASSIGN_OR_RETURN(Statement select, db.Prepare("SELECT " + std::string(kBatchColumns) +
                                                       " FROM batches WHERE id = ?1"));
  select.BindText(1, id);
  STRATA_ASSIGN_OR_RETURN(const bool row, select.Step());
  if (!row) return NotFoundError("no batch with id " + Quoted(id));
  return ReadBatch(select);
}

// Writes what changes after creation (state, files, times); the counts change only by
// RecordResult's increment.
Status SaveBatch(Db& db, const BatchRecord& batch) {
  STRATA_ASSIGN_OR_RETURN(
      Statement update,
      db.Prepare("UPDATE batches SET state = ?2, output_file_id = ?3, error_file_id = ?4, "
                 "finalizing_at = ?5, completed_at = ?6, failed_at = ?7, expired_at = ?8, "
                 "cancelling_at = ?9, cancelled_at = ?10 WHERE id = ?1"));
  update.BindText(1, batch.id)
      .BindText(2, BatchStateName(batch.state))
      .BindTextOrNull(3, batch.output_file_id)
      .BindTextOrNull(4, batch.error_file_id)
      .Bind(5, batch.finalizing_at)
      .Bind(6, batch.completed_at)
      .Bind(7, batch.failed_at)
      .Bind(8, batch.expired_at)
      .Bind(9, batch.cancelling_at)
      .Bind(10, batch.cancelled_at);
  return update.Run();
}

StatusOr<std::vector<std::string>> SelectIds(Db& db, std::string_view sql,
                                             const std::vector<std::string_view>& texts) {
  STRATA_ASSIGN_OR_RETURN(Statement select, db.Prepare(sql));
  for (size_t i = 0; i < texts.size(); ++i) select.BindText(static_cast<int>(i + 1), texts[i]);
  std::vector<std::string> ids;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) return ids;
    ids.push_back(select.Text(0));
  }
}

// Writes the output file (the ok results) and, when a line failed, the error file of `batch`
// from the results recorded so far, in line order, and sets their ids in `batch` (saved by the
// caller, in the same transaction).
Status WriteResultFiles(Db& db, std::mt19937_64& rng, BatchRecord& batch, int64_t now) {
  STRATA_ASSIGN_OR_RETURN(
      Statement select,
      db.Prepare("SELECT ok, json FROM batch_results WHERE batch_id = ?1 ORDER BY line_index"));
  select.BindText(1, batch.id);
  std::string output, errors;
  bool any_failed = false;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    const bool ok = select.Int(0) != 0;
    any_failed |= !ok;
    std::string& file = ok ? output : errors;
    file += select.Text(1);
    file += '\n';
  }
  STRATA_ASSIGN_OR_RETURN(
      const FileRecord output_file,
      InsertFile(db, rng, kOutputPurpose, batch.id + "_output.jsonl", output, now, batch.owner));
  batch.output_file_id = output_file.id;
  if (any_failed) {
    STRATA_ASSIGN_OR_RETURN(
        const FileRecord error_file,
        InsertFile(db, rng, kOutputPurpose, batch.id + "_error.jsonl", errors, now, batch.owner));
    batch.error_file_id = error_file.id;
  }
  return OkStatus();
}

// Log-and-empty for the methods whose contract has no Status.
template <typename T>
T ValueOrLog(StatusOr<T> result, std::string_view what) {
  if (result.ok()) return std::move(result).value();
  LogError("job store: " + std::string(what) + " failed", {{"error", result.status().message()}});
  return T();
}

}  // namespace

std::string_view BatchStateName(BatchState state) {
  switch (state) {
    case BatchState::kValidating:
      return "validating";
    case BatchState::kFailed:
      return "failed";
    case BatchState::kInProgress:
      return "in_progress";
    case BatchState::kFinalizing:
      return "finalizing";
    case BatchState::kCompleted:
      return "completed";
    case BatchState::kExpired:
      return "expired";
    case BatchState::kCancelling:
      return "cancelling";
    case BatchState::kCancelled:
      return "cancelled";
  }
  return "failed";
}

bool BatchStateIsFinished(BatchState state) {
  return state == BatchState::kCompleted || state == BatchState::kFailed ||
         state == BatchState::kExpired || state == BatchState::kCancelled;
}

namespace {

// Runs `sql` (which sets the schema version) under the write lock when the file is still at
// version `from`, read again under the lock so that two processes opening the file at once
// upgrade it once; `check` may refuse first. Returns the version the file is at after.
StatusOr<int64_t> UpgradeUnderLock(Db& db, int64_t from, const char* sql,
                                   const std::function<Status()>& check = {}) {
  STRATA_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db));
  STRATA_ASSIGN_OR_RETURN(const int64_t version, db.QueryInt("PRAGMA user_version"));
  if (version != from) return version;
  if (check) STRATA_RETURN_IF_ERROR(check());
  STRATA_RETURN_IF_ERROR(db.Exec(sql));
  STRATA_RETURN_IF_ERROR(tx.Commit());
  return kJobStoreSchemaVersion;
}

}  // namespace

StatusOr<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Db> db, Db::Open(path));
  const auto where = [&path](const Status& status) {
    return status.WithContext("job store " + path);
  };
  // The busy timeout first: switching to WAL takes a lock another process may hold.
  for (const char* pragma : {"PRAGMA busy_timeout = 5000", "PRAGMA foreign_keys = ON",
                             "PRAGMA journal_mode = WAL", "PRAGMA synchronous = FULL"}) {
    if (Status status = db->Exec(pragma); !status.ok()) return where(status);
  }
  StatusOr<int64_t> version = db->QueryInt("PRAGMA user_version");
  if (!version.ok()) return where(version.status());
  if (*version == 0) {
    version = UpgradeUnderLock(*db, 0, kSchema, [&db]() -> Status {
      STRATA_ASSIGN_OR_RETURN(const int64_t tables,
                              db->QueryInt("SELECT COUNT(*) FROM sqlite_master"));
      if (tables == 0) return OkStatus();
      return FailedPreconditionError(
          "a database that is not a Strata job store (it has tables but no schema version)");
    });
    if (!version.ok()) return where(version.status());
  }
  if (*version == 1) {
    version = UpgradeUnderLock(*db, 1, kMigrateFrom1);
    if (!version.ok()) return where(version.status());
  }
  if (*version != kJobStoreSchemaVersion) {
    return FailedPreconditionError("job store " + path + ": schema version " +
                                   std::to_string(*version) + " is newer than this build's (" +
                                   std::to_string(kJobStoreSchemaVersion) +
                                   "); open it with a newer Strata");
  }
  return std::unique_ptr<JobStore>(new JobStore(std::move(db)));
}

JobStore::JobStore(std::unique_ptr<Db> db) : db_(std::move(db)) {
  std::random_device device;
  std::seed_seq seed{device(), device(), device(), device(),
                     device(), device(), device(), device()};
  rng_.seed(seed);
}

JobStore::~JobStore() = default;

// ---- Files --------------------------------------------------------------------------------

StatusOr<FileRecord> JobStore::AddFile(std::string_view purpose, std::string_view filename,
                                       std::string_view content, int64_t now,
                                       std::string_view owner) {
  std::lock_guard lock(mutex_);
  return InsertFile(*db_, rng_, purpose, filename, content, now, owner);
}

StatusOr<FileRecord> JobStore::GetFile(std::string_view id) {
  std::lock_guard lock(mutex_);
  return GetFileLocked(*db_, id);
}

StatusOr<std::string> JobStore::FileContent(std::string_view id) {
  std::lock_guard lock(mutex_);
  STRATA_ASSIGN_OR_RETURN(Statement select,
                          db_->Prepare("SELECT content FROM files WHERE id = ?1"));
  select.BindText(1, id);
  STRATA_ASSIGN_OR_RETURN(const bool row, select.Step());
  if (!row) return NotFoundError("no file with id " + Quoted(id));
  return select.Blob(0);
}

std::vector<FileRecord> JobStore::ListFiles(std::string_view purpose, std::string_view owner) {
  std::lock_guard lock(mutex_);
  const auto list = [&]() -> StatusOr<std::vector<FileRecord>> {
    STRATA_ASSIGN_OR_RETURN(Statement select,
                            db_->Prepare("SELECT " + std::string(kFileColumns) +
                                         " FROM files WHERE (?1 = '' OR purpose = ?1) AND "
                                         "owner = ?2 ORDER BY seq DESC"));
    select.BindText(1, purpose).BindText(2, owner);
    std::vector<FileRecord> files;
    while (true) {
      STRATA_ASSIGN_OR_RETURN(const bool row, select.Step());
      if (!row) return files;
      files.push_back(ReadFile(select));
    }
  };
  return ValueOrLog(list(), "listing files");
}

Status JobStore::DeleteFile(std::string_view id) {
  std::lock_guard lock(mutex_);
  STRATA_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(*db_));
  STRATA_RETURN_IF_ERROR(GetFileLocked(*db_, id).status());
  STRATA_ASSIGN_OR_RETURN(
      const std::vector<std::string> users,
      SelectIds(*db_,
                "SELECT id FROM batches WHERE input_file_id = ?1 AND state NOT IN (?2, ?3, ?4, "
                "?5) ORDER BY seq LIMIT 1",
                {id, BatchStateName(BatchState::kCompleted), BatchStateName(BatchState::kFailed),
                 BatchStateName(BatchState::kExpired), BatchStateName(BatchState::kCancelled)}));
  if (!users.empty()) {
    return FailedPreconditionError("file " + Quoted(id) + " is the input of batch " +
                                   Quoted(users[0]) +
                                   ", which has not finished; cancel it or wait for it to end");
  }
  STRATA_ASSIGN_OR_RETURN(Statement remove, db_->Prepare("DELETE FROM files WHERE id = ?1"));
  remove.BindText(1, id);
  STRATA_RETURN_IF_ERROR(remove.Run());
  return tx.Commit();
}

// ---- Batches ------------------------------------------------------------------------------

StatusOr<BatchRecord> JobStore::CreateBatch(const BatchRecord& proto,
                                            const std::vector<BatchLine>& lines,
                                            const std::vector<LineResult>& invalid, int64_t now,
                                            int64_t window_seconds) {
  if (window_seconds < 1) {
    return InvalidArgumentError("a batch's completion window must be at least 1 second, got " +
                                std::to_string(window_seconds));
  }
  {
    std::set<int64_t> indexes;
    const auto check = [&indexes](int64_t index) -> Status {
      if (index < 0) {
        return InvalidArgumentError("batch line index must be >= 0, got " + std::to_string(index));
      }
      if (!indexes.insert(index).second) {
        return InvalidArgumentError("batch line index " + std::to_string(index) + " given twice");
      }
      return OkStatus();
    };
    for (const BatchLine& line : lines) STRATA_RETURN_IF_ERROR(check(line.index));
    for (const LineResult& result : invalid) STRATA_RETURN_IF_ERROR(check(result.index));
  }

  BatchRecord batch;
  batch.endpoint = proto.endpoint;
  batch.input_file_id = proto.input_file_id;
  batch.completion_window = proto.completion_window;
  batch.metadata_json = proto.metadata_json;
  batch.owner = proto.owner;
  batch.state = BatchState::kInProgress;
  batch.created_at = batch.in_progress_at = now;
  batch.expires_at = now + window_seconds;
  batch.counts.total = static_cast<int64_t>(lines.size() + invalid.size());
  batch.counts.failed = static_cast<int64_t>(invalid.size());

  std::lock_guard lock(mutex_);
  STRATA_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(*db_));
  STRATA_RETURN_IF_ERROR(GetFileLocked(*db_, batch.input_file_id).status());
  STRATA_ASSIGN_OR_RETURN(
      Statement insert,
      db_->Prepare("INSERT INTO batches (id, endpoint, input_file_id, completion_window, state, "
                   "metadata_json, created_at, in_progress_at, expires_at, total, completed, "
                   "failed, owner) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 0, ?11, ?12)"));
  for (int attempt = 0;; ++attempt) {
    batch.id = RandomId(rng_, "batch_");
    insert.Reset();
    insert.BindText(1, batch.id)
        .BindText(2, batch.endpoint)
        .BindText(3, batch.input_file_id)
        .BindText(4, batch.completion_window)
        .BindText(5, BatchStateName(batch.state))
        .BindTextOrNull(6, batch.metadata_json)
        .Bind(7, batch.created_at)
        .Bind(8, batch.in_progress_at)
        .Bind(9, batch.expires_at)
        .Bind(10, batch.counts.total)
        .Bind(11, batch.counts.failed)
        .BindText(12, batch.owner);
    Status status = insert.Run();
    if (status.ok()) break;
    if (status.code() != StatusCode::kAlreadyExists || attempt + 1 == kIdAttempts) return status;
  }

  STRATA_ASSIGN_OR_RETURN(Statement insert_line,
                          db_->Prepare("INSERT INTO batch_lines (batch_id, line_index, "
                                       "custom_id, body) VALUES (?1, ?2, ?3, ?4)"));
  for (const BatchLine& line : lines) {
    insert_line.Reset();
    insert_line.BindText(1, batch.id)
        .Bind(2, line.index)
        .BindText(3, line.custom_id)
        .BindText(4, line.body);
    STRATA_RETURN_IF_ERROR(insert_line.Run());
  }
  STRATA_ASSIGN_OR_RETURN(Statement insert_result,
                          db_->Prepare("INSERT INTO batch_results (batch_id, line_index, ok, "
                                       "json) VALUES (?1, ?2, ?3, ?4)"));
  for (const LineResult& result : invalid) {
    insert_result.Reset();
    // A line that failed validation is a failure whatever `ok` says.
    insert_result.BindText(1, batch.id).Bind(2, result.index).Bind(3, 0).BindText(4, result.json);
    STRATA_RETURN_IF_ERROR(insert_result.Run());
  }
  STRATA_RETURN_IF_ERROR(tx.Commit());
  return batch;
}

StatusOr<BatchRecord> JobStore::GetBatch(std::string_view id) {
  std::lock_guard lock(mutex_);
  return GetBatchLocked(*db_, id);
}

std::vector<BatchRecord> JobStore::ListBatches(std::string_view after, size_t limit,
                                               std::string_view owner) {
  std::lock_guard lock(mutex_);
  const auto list = [&]() -> StatusOr<std::vector<BatchRecord>> {
    // `after` = "": every batch (seq below the largest integer); an unknown id: none (NULL).
    STRATA_ASSIGN_OR_RETURN(
        Statement select,
        db_->Prepare("SELECT " + std::string(kBatchColumns) +
                     " FROM batches WHERE owner = ?4 AND seq < (CASE WHEN ?1 = '' THEN ?3 ELSE "
                     "(SELECT seq FROM batches WHERE id = ?1 AND owner = ?4) END) "
                     "ORDER BY seq DESC LIMIT ?2"));
    select.BindText(1, after)
        .Bind(2, static_cast<int64_t>(std::min<size_t>(limit, std::numeric_limits<int64_t>::max())))
        .Bind(3, std::numeric_limits<int64_t>::max())
        .BindText(4, owner);
    std::vector<BatchRecord> batches;
    while (true) {
      STRATA_ASSIGN_OR_RETURN(const bool row, select.Step());
      if (!row) return batches;
      batches.push_back(ReadBatch(select));
    }
  };
  return ValueOrLog(list(), "listing batches");
}

std::vector<std::string> JobStore::BatchIdsInState(BatchState state) {
  std::lock_guard lock(mutex_);
  return ValueOrLog(SelectIds(*db_, "SELECT id FROM batches WHERE state = ?1 ORDER BY seq",
                              {BatchStateName(state)}),
                    "listing batches by state");
}

std::vector<std::string> JobStore::CompletableBatches() {
  std::lock_guard lock(mutex_);
  return ValueOrLog(
      SelectIds(*db_,
                "SELECT id FROM batches b WHERE state = ?1 AND NOT EXISTS (SELECT 1 FROM "
                "batch_lines l INDEXED BY batch_lines_pending "
                "WHERE l.batch_id = b.id AND l.done = 0) ORDER BY seq",
                {BatchStateName(BatchState::kInProgress)}),
      "listing completable batches");
}

std::vector<PendingLine> JobStore::PendingLines(
    size_t limit, const std::set<std::pair<std::string, int64_t>>& skip) {
  if (limit == 0) return {};
  std::lock_guard lock(mutex_);
  const auto list = [&]() -> StatusOr<std::vector<PendingLine>> {
    STRATA_ASSIGN_OR_RETURN(
        Statement select,
        db_->Prepare("SELECT b.id, b.endpoint, l.line_index, l.custom_id, l.body FROM batches b "
                     "JOIN batch_lines l INDEXED BY batch_lines_pending ON l.batch_id = b.id "
                     "WHERE b.state = ?1 AND l.done = 0 ORDER BY b.seq, l.line_index LIMIT ?2"));
    // At most skip.size() rows are passed over, so this many rows always suffice.
    const size_t max_rows =
        std::min<size_t>(std::numeric_limits<int64_t>::max() - skip.size(), limit) + skip.size();
    select.BindText(1, BatchStateName(BatchState::kInProgress))
        .Bind(2, static_cast<int64_t>(max_rows));
    std::vector<PendingLine> pending;
    while (pending.size() < limit) {
      STRATA_ASSIGN_OR_RETURN(const bool row, select.Step());
      if (!row) break;
      PendingLine line;
      line.batch_id = select.Text(0);
      line.line.index = select.Int(2);
      if (skip.contains({line.batch_id, line.line.index})) continue;
      line.endpoint = select.Text(1);
      line.line.custom_id = select.Text(3);
      line.line.body = select.Text(4);
      pending.push_back(std::move(line));
    }
    return pending;
  };
  return ValueOrLog(list(), "listing pending lines");
}

StatusOr<bool> JobStore::RecordResult(std::string_view batch_id, const LineResult& result) {
  std::lock_guard lock(mutex_);
  // Returning early without Commit rolls the transaction back: nothing changes.
  STRATA_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(*db_));
  STRATA_ASSIGN_OR_RETURN(const BatchRecord batch, GetBatchLocked(*db_, batch_id));
  if (batch.state != BatchState::kInProgress && batch.state != BatchState::kCancelling) {
    return false;
  }
  // The exactly-once check is this INSERT's primary key, not a prior look.
  STRATA_ASSIGN_OR_RETURN(Statement insert,
                          db_->Prepare("INSERT INTO batch_results (batch_id, line_index, ok, "
                                       "json) VALUES (?1, ?2, ?3, ?4)"));
  insert.BindText(1, batch_id)
      .Bind(2, result.index)
      .Bind(3, result.ok ? 1 : 0)
      .BindText(4, result.json);
  if (Status status = insert.Run(); !status.ok()) {
    if (status.code() == StatusCode::kAlreadyExists) return false;
    return status;
  }
  STRATA_ASSIGN_OR_RETURN(Statement line,
                          db_->Prepare("UPDATE batch_lines SET done = 1 WHERE batch_id = ?1 AND "
                                       "line_index = ?2"));
  line.BindText(1, batch_id).Bind(2, result.index);
  STRATA_RETURN_IF_ERROR(line.Run());
  if (db_->Changes() == 0) {
    return NotFoundError("batch " + Quoted(batch_id) + " has no line " +
                         std::to_string(result.index));
  }
  STRATA_ASSIGN_OR_RETURN(Statement count,
                          db_->Prepare("UPDATE batches SET completed = completed + ?2, failed = "
                                       "failed + ?3 WHERE id = ?1"));
  count.BindText(1, batch_id).Bind(2, result.ok ? 1 : 0).Bind(3, result.ok ? 0 : 1);
  STRATA_RETURN_IF_ERROR(count.Run());
  STRATA_RETURN_IF_ERROR(tx.Commit());
  return true;
}

StatusOr<BatchRecord> JobStore::Complete(std::string_view batch_id, int64_t now) {
  std::lock_guard lock(mutex_);
  STRATA_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(*db_));
  STRATA_ASSIGN_OR_RETURN(BatchRecord batch, GetBatchLocked(*db_, batch_id));
  if (batch.state != BatchState::kInProgress) {
    return FailedPreconditionError("batch " + Quoted(batch_id) + " is " +
                                   std::string(BatchStateName(batch.state)) +
                                   ", only a batch in_progress can complete");
  }
  STRATA_ASSIGN_OR_RETURN(
      Statement missing,
      db_->Prepare(
          "SELECT COUNT(*) FROM batch_lines INDEXED BY batch_lines_pending WHERE batch_id = ?1 "
          "AND done = 0"));
  missing.BindText(1, batch_id);
  STRATA_ASSIGN_OR_RETURN(const bool row, missing.Step());
  if (row && missing.Int(0) > 0) {
    return FailedPreconditionError("batch " + Quoted(batch_id) + " still has " +
                                   std::to_string(missing.Int(0)) + " lines without a result");
  }
  STRATA_RETURN_IF_ERROR(WriteResultFiles(*db_, rng_, batch, now));
  batch.state = BatchState::kCompleted;
  batch.finalizing_at = batch.completed_at = now;
  STRATA_RETURN_IF_ERROR(SaveBatch(*db_, batch));
  STRATA_RETURN_IF_ERROR(tx.Commit());
  return batch;
}

StatusOr<BatchRecord> JobStore::Cancel(std::string_view batch_id, int64_t now) {
  std::lock_guard lock(mutex_);
  STRATA_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(*db_));
  STRATA_ASSIGN_OR_RETURN(BatchRecord batch, GetBatchLocked(*db_, batch_id));
  if (batch.state != BatchState::kInProgress) return batch;
  batch.state = BatchState::kCancelling;
  batch.cancelling_at = now;
  STRATA_RETURN_IF_ERROR(SaveBatch(*db_, batch));
  STRATA_RETURN_IF_ERROR(tx.Commit());
  return batch;
}

StatusOr<BatchRecord> JobStore::FinishCancel(std::string_view batch_id, int64_t now) {
  std::lock_guard lock(mutex_);
  STRATA_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(*db_));
  STRATA_ASSIGN_OR_RETURN(BatchRecord batch, GetBatchLocked(*db_, batch_id));
  if (batch.state == BatchState::kCancelled) return batch;
  if (batch.state != BatchState::kCancelling) {
    return FailedPreconditionError("batch " + Quoted(batch_id) + " is " +
                                   std::string(BatchStateName(batch.state)) +
                                   ", only a batch cancelling can finish cancelling");
  }
  STRATA_RETURN_IF_ERROR(WriteResultFiles(*db_, rng_, batch, now));
  batch.state = BatchState::kCancelled;
  batch.cancelled_at = now;
  STRATA_RETURN_IF_ERROR(SaveBatch(*db_, batch));
  STRATA_RETURN_IF_ERROR(tx.Commit());
  return batch;
}

StatusOr<int64_t> JobStore::ExpireOverdue(int64_t now) {
  std::lock_guard lock(mutex_);
  STRATA_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(*db_));
  STRATA_ASSIGN_OR_RETURN(Statement select,
                          db_->Prepare("SELECT id FROM batches WHERE state = ?1 AND expires_at "
                                       "<= ?2 ORDER BY seq"));
  select.BindText(1, BatchStateName(BatchState::kInProgress)).Bind(2, now);
  std::vector<std::string> ids;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    ids.push_back(select.Text(0));
  }
  for (const std::string& id : ids) {
    STRATA_ASSIGN_OR_RETURN(BatchRecord batch, GetBatchLocked(*db_, id));
    STRATA_RETURN_IF_ERROR(WriteResultFiles(*db_, rng_, batch, now));
    batch.state = BatchState::kExpired;
    batch.expired_at = now;
    STRATA_RETURN_IF_ERROR(SaveBatch(*db_, batch));
  }
  STRATA_RETURN_IF_ERROR(tx.Commit());
  return static_cast<int64_t>(ids.size());
}

StatusOr<int64_t> JobStore::DeleteFinishedBefore(int64_t before) {
  std::lock_guard lock(mutex_);
  STRATA_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(*db_));
  STRATA_ASSIGN_OR_RETURN(
      Statement select,
      db_->Prepare("SELECT id, output_file_id, error_file_id FROM batches WHERE "
                   "(state = ?2 AND completed_at < ?1) OR (state = ?3 AND failed_at < ?1) OR "
                   "(state = ?4 AND expired_at < ?1) OR (state = ?5 AND cancelled_at < ?1)"));
  select.Bind(1, before)
      .BindText(2, BatchStateName(BatchState::kCompleted))
      .BindText(3, BatchStateName(BatchState::kFailed))
      .BindText(4, BatchStateName(BatchState::kExpired))
      .BindText(5, BatchStateName(BatchState::kCancelled));
  std::vector<std::string> batch_ids, file_ids;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(const bool row, select.Step());
    if (!row) break;
    batch_ids.push_back(select.Text(0));
    for (int column : {1, 2}) {
      if (std::string id = select.Text(column); !id.empty()) file_ids.push_back(std::move(id));
    }
  }
  STRATA_ASSIGN_OR_RETURN(Statement remove_file, db_->Prepare("DELETE FROM files WHERE id = ?1"));
  for (const std::string& id : file_ids) {
    remove_file.Reset();
    remove_file.BindText(1, id);
    STRATA_RETURN_IF_ERROR(remove_file.Run());
  }
  // Lines and results go with their batch (ON DELETE CASCADE).
  STRATA_ASSIGN_OR_RETURN(Statement remove_batch,
                          db_->Prepare("DELETE FROM batches WHERE id = ?1"));
  for (const std::string& id : batch_ids) {
    remove_batch.Reset();
    remove_batch.BindText(1, id);
    STRATA_RETURN_IF_ERROR(remove_batch.Run());
  }
  STRATA_RETURN_IF_ERROR(tx.Commit());
  return static_cast<int64_t>(batch_ids.size());
}

std::map<BatchState, int64_t> JobStore::CountByState() {
  std::map<BatchState, int64_t> counts;
  for (BatchState state : kAllStates) counts[state] = 0;
  std::lock_guard lock(mutex_);
  const auto count = [&]() -> StatusOr<bool> {
    STRATA_ASSIGN_OR_RETURN(Statement select,
                            db_->Prepare("SELECT state, COUNT(*) FROM batches GROUP BY state"));
    while (true) {
      STRATA_ASSIGN_OR_RETURN(const bool row, select.Step());
      if (!row) return true;
      counts[ParseBatchState(select.Text(0))] += select.Int(1);
    }
  };
  ValueOrLog(count(), "counting batches");
  return counts;
}

}  // namespace strata::jobs
