// The durable store of asynchronous batch jobs (the OpenAI Batch API's files and batches), on
// one SQLite database file.
//
// The HTTP routes (/v1/files, /v1/batches) and the batch runner call it; it holds uploaded files,
// each batch with its request lines, and each line's result. Jobs survive SIGKILL: every change
// is one transaction, committed to the write-ahead log with synchronous=FULL before a method
// returns, so after a restart PendingLines gives exactly the lines that have no result yet. A
// line's result is recorded at most once: the results table's primary key (batch id, line index)
// refuses a second INSERT, and RecordResult reports that as `false`.
//
// A batch's life: CreateBatch -> in_progress; the runner takes PendingLines, runs them and
// RecordResult each; when every line has a result Complete writes the output and error files
// (state completed). Cancel makes it cancelling (no more pending lines); the runner lets the lines
// it has running end (their results still count) and calls FinishCancel (state cancelled, partial
// files). ExpireOverdue ends batches past their window (state expired, partial files).
// DeleteFinishedBefore removes old finished batches with their output and error files. (The
// states validating, finalizing and failed exist for the API's shape; the store never leaves a
// batch in them: validation happens before CreateBatch and finalizing is one transaction.)
//
// Times are Unix seconds given by the caller (`now`); a time of 0 means "not yet" (null in JSON).
// Methods that return a plain list or map log a database error and return what they have (empty).
//
// Thread rules: every method may be called from any thread; calls are serialized on one SQLite
// connection. Another process may open the same file (SQLite's locks and a busy timeout keep it
// consistent), but two runners over one store would run lines twice; run one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/common/status.h"

namespace strata::jobs {

// The schema this build writes (PRAGMA user_version); a newer file is refused.
// Version 2 added owners; a version 1 file is migrated when opened (its files and batches get
// the owner "").
inline constexpr int64_t kJobStoreSchemaVersion = 2;

// An uploaded file (input JSONL, or an output/error file the store wrote).
struct FileRecord {
  std::string id;       // "file-" + 24 random lowercase alphanumerics
  std::string purpose;  // "batch" (uploads), "batch_output" (files the store writes)
  std::string filename;
  int64_t bytes = 0;
  int64_t created_at = 0;  // Unix seconds
  // Who may see it: the API key name that uploaded it (or whose batch wrote it); "" without
  // API keys.
  std::string owner;
};

enum class BatchState {
  kValidating,
  kFailed,
  kInProgress,
  kFinalizing,
  kCompleted,
  kExpired,
  kCancelling,
  kCancelled
};
// "validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling",
// "cancelled".
std::string_view BatchStateName(BatchState state);
// Whether a batch in `state` is over (completed, failed, expired, cancelled).
bool BatchStateIsFinished(BatchState state);

struct BatchCounts {
  int64_t total = 0;
  int64_t completed = 0;
  int64_t failed = 0;
};

struct BatchRecord {
  std::string id;        // "batch_" + 24 random lowercase alphanumerics
  std::string endpoint;  // "/v1/completions", "/v1/chat/completions", "/v1/embeddings"
  std::string input_file_id;
  std::string completion_window;  // "24h"
  BatchState state = BatchState::kInProgress;
  std::string output_file_id;  // "" until written
  std::string error_file_id;   // "" when no line failed
  std::string metadata_json;   // the client's metadata object as JSON text ("" = null)
  int64_t created_at = 0, in_progress_at = 0, expires_at = 0, finalizing_at = 0, completed_at = 0,
          failed_at = 0, expired_at = 0, cancelling_at = 0, cancelled_at = 0;  // 0 = null
  BatchCounts counts;
  std::string owner;  // the API key name that created it; "" without API keys
};

// One request line of a batch, validated by the caller.
struct BatchLine {
  int64_t index = 0;  // 0-based position in the input file
  std::string custom_id;
  std::string body;  // the request body JSON text
};

// A line that still needs running (of a batch in progress).
struct PendingLine {
  std::string batch_id;
  std::string endpoint;
  BatchLine line;
};

// What became of a line: `ok` lines go to the output file, others to the error file; `json` is
// that file's whole line (without the newline), written by the caller.
struct LineResult {
  int64_t index = 0;
  bool ok = false;
  std::string json;
};

class Db;

class JobStore {
 public:
  // Opens (creating when absent) the database at `path`: WAL journal, synchronous=FULL, foreign
  // keys on, a 5 s busy timeout; creates the schema in a new file. INVALID_ARGUMENT (a path that
  // cannot be opened, a file that is not a database) / INTERNAL with SQLite's message when it
  // cannot; FAILED_PRECONDITION for a database of a newer schema version, or one that is not a
  // job store.
  static StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // Files. `content` is kept as bytes (a BLOB); `bytes` is its size.
  StatusOr<FileRecord> AddFile(std::string_view purpose, std::string_view filename,
                               std::string_view content, int64_t now, std::string_view owner = "");
  StatusOr<FileRecord> GetFile(std::string_view id);       // NOT_FOUND naming the id
  StatusOr<std::string> FileContent(std::string_view id);  // NOT_FOUND
  // `owner`'s files with `purpose` ("" = all), newest first.
  std::vector<FileRecord> ListFiles(std::string_view purpose, std::string_view owner = "");
  // NOT_FOUND; FAILED_PRECONDITION while a batch not yet finished uses it as input.
  Status DeleteFile(std::string_view id);

  // Creates a batch in state in_progress (in_progress_at = created_at = now, expires_at = now +
  // window_seconds) with its lines and, for lines that failed validation, their results already
  // recorded (counts.total = lines + invalid, counts.failed = invalid). One transaction.
  // `proto` gives endpoint, input_file_id, completion_window, metadata_json, owner (which the
  // output and error files inherit). NOT_FOUND when the
  // input file does not exist; INVALID_ARGUMENT for a line index given twice (among `lines` and
  // `invalid` together), a negative index or window_seconds < 1.
  StatusOr<BatchRecord> CreateBatch(const BatchRecord& proto, const std::vector<BatchLine>& lines,
                                    const std::vector<LineResult>& invalid, int64_t now,
                                    int64_t window_seconds);
  StatusOr<BatchRecord> GetBatch(std::string_view id);  // NOT_FOUND
  // `owner`'s batches, newest first (creation order); `after`: the id of the last batch of the
  // previous page ("" = from the newest; an id that is not stored, or not `owner`'s, gives an
  // empty page); at most `limit`.
  std::vector<BatchRecord> ListBatches(std::string_view after, size_t limit,
                                       std::string_view owner = "");
  // The ids of the batches in `state`, oldest first (the runner, after a restart: the cancelling
  // batches to FinishCancel, nothing of theirs being in flight any more).
  std::vector<std::string> BatchIdsInState(BatchState state);
  // The ids of batches in_progress whose every line has a result, oldest first: those to
  // Complete (a batch of only invalid lines is one from the start; so is one whose last result
  // was recorded just before a crash).
  std::vector<std::string> CompletableBatches();

  // Up to `limit` lines without a result, of batches in_progress, oldest batch first, in line
  // order, skipping the (batch id, line index) pairs in `skip` (lines already running).
  std::vector<PendingLine> PendingLines(size_t limit,
                                        const std::set<std::pair<std::string, int64_t>>& skip);

  // Records one line's result and counts it (completed or failed), in one transaction. Returns
  // false (and changes nothing) when that line already has a result or the batch is not
  // in_progress or cancelling: a line is recorded exactly once. NOT_FOUND for an unknown batch
  // or a line index the batch does not have.
  StatusOr<bool> RecordResult(std::string_view batch_id, const LineResult& result);

  // A batch in_progress whose every line has a result: writes the output file (the ok results'
  // json, one per line, in line order, purpose "batch_output", filename "<batch
  // id>_output.jsonl") and the error file (same for the failed ones, "<batch id>_error.jsonl";
  // none when no line failed), sets their ids, finalizing_at and completed_at = now, state
  // completed. One transaction. FAILED_PRECONDITION when lines are still missing or the state is
  // not in_progress; NOT_FOUND.
  StatusOr<BatchRecord> Complete(std::string_view batch_id, int64_t now);

  // in_progress -> cancelling (cancelling_at = now); cancelling/cancelled/completed/failed/expired
  // stay as they are (returned unchanged). NOT_FOUND.
  StatusOr<BatchRecord> Cancel(std::string_view batch_id, int64_t now);
  // cancelling -> cancelled: writes output and error files from the results recorded so far (as
  // Complete does), cancelled_at = now. One transaction. A batch already cancelled is returned
  // unchanged (a runner that restarts may finish a cancel twice); other states are
  // FAILED_PRECONDITION; NOT_FOUND.
  StatusOr<BatchRecord> FinishCancel(std::string_view batch_id, int64_t now);

  // Batches in_progress whose expires_at has passed (expires_at <= now) -> expired (expired_at =
  // now), with their partial output and error files written as in FinishCancel. One transaction.
  // Returns how many.
  StatusOr<int64_t> ExpireOverdue(int64_t now);
  // Deletes batches that finished (completed, failed, expired, cancelled) before `before` (their
  // completed_at / failed_at / expired_at / cancelled_at < before), their lines, results and
  // output/error files (not their input files). One transaction. Returns how many batches.
  StatusOr<int64_t> DeleteFinishedBefore(int64_t before);

  // Batches per state, every state present (for a metrics gauge).
  std::map<BatchState, int64_t> CountByState();

 private:
  explicit JobStore(std::unique_ptr<Db> db);

  // Guards db_ and rng_: one call at a time on the connection.
  std::mutex mutex_;
  std::unique_ptr<Db> db_;
  std::mt19937_64 rng_;
};

}  // namespace strata::jobs
