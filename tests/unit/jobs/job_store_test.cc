#include "strata/jobs/job_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace strata::jobs {
namespace {

constexpr int64_t kNow = 1'700'000'000;
constexpr int64_t kDay = 24 * 3600;

// A fresh database path per test (the file and its WAL companions removed first).
std::string DbPath(const std::string& name) {
  const std::string path =
      ::testing::TempDir() + "job_store_" + name + "_" + std::to_string(::getpid()) + ".db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  return path;
}

std::unique_ptr<JobStore> OpenOrDie(const std::string& path) {
  auto store = JobStore::Open(path);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

std::vector<BatchLine> Lines(std::initializer_list<int64_t> indexes) {
  std::vector<BatchLine> lines;
  for (int64_t i : indexes) {
    lines.push_back({.index = i,
                     .custom_id = "req-" + std::to_string(i),
                     .body = R"({"prompt":"line )" + std::to_string(i) + R"("})"});
  }
  return lines;
}

LineResult Ok(int64_t index) {
  return {.index = index, .ok = true, .json = "ok " + std::to_string(index)};
}
LineResult Err(int64_t index) {
  return {.index = index, .ok = false, .json = "err " + std::to_string(index)};
}

// An input file and a batch over it with `lines` and `invalid`, created at `now`.
BatchRecord MakeBatch(JobStore& store, const std::vector<BatchLine>& lines,
                      const std::vector<LineResult>& invalid = {}, int64_t now = kNow,
                      const std::string& owner = "") {
  auto input = store.AddFile("batch", "input.jsonl", "{}\n", now, owner);
  EXPECT_TRUE(input.ok()) << input.status().ToString();
  BatchRecord proto;
  proto.endpoint = "/v1/completions";
  proto.input_file_id = input.ok() ? input->id : "";
  proto.completion_window = "24h";
  proto.owner = owner;
  auto batch = store.CreateBatch(proto, lines, invalid, now, kDay);
  EXPECT_TRUE(batch.ok()) << batch.status().ToString();
  return batch.ok() ? *batch : BatchRecord();
}

std::string Content(JobStore& store, const std::string& file_id) {
  auto content = store.FileContent(file_id);
  EXPECT_TRUE(content.ok()) << content.status().ToString();
  return content.ok() ? *content : "";
}

std::vector<std::pair<std::string, int64_t>> Keys(const std::vector<PendingLine>& pending) {
  std::vector<std::pair<std::string, int64_t>> keys;
  for (const PendingLine& line : pending) keys.emplace_back(line.batch_id, line.line.index);
  return keys;
}

// The first column of the first row of `sql` on the database at `path`, opened directly.
std::string QueryText(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  std::string value = "(error)";
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      value = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return value;
}

bool IsIdChars(std::string_view s) {
  return s.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") == std::string_view::npos;
}

TEST(JobStore, FilesRoundTripAndUnknownIdsAreNotFound) {
  auto store = OpenOrDie(DbPath("files"));
  ASSERT_NE(store, nullptr);
  const std::string content("{\"a\":1}\n\0binary\n", 16);
  auto added = store->AddFile("batch", "in.jsonl", content, kNow);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(added->id.substr(0, 5), "file-");
  EXPECT_EQ(added->id.size(), 5u + 24u);
  EXPECT_TRUE(IsIdChars(added->id.substr(5))) << added->id;
  EXPECT_EQ(added->bytes, 16);

  auto got = store->GetFile(added->id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->purpose, "batch");
  EXPECT_EQ(got->filename, "in.jsonl");
  EXPECT_EQ(got->bytes, 16);
  EXPECT_EQ(got->created_at, kNow);
  EXPECT_EQ(Content(*store, added->id), content);

  auto empty = store->AddFile("batch_output", "empty.jsonl", "", kNow + 1);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(Content(*store, empty->id), "");
  const auto all = store->ListFiles("");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, empty->id);  // newest first
  EXPECT_EQ(all[1].id, added->id);
  const auto uploads = store->ListFiles("batch");
  ASSERT_EQ(uploads.size(), 1u);
  EXPECT_EQ(uploads[0].id, added->id);

  auto missing = store->GetFile("file-nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("file-nope"), std::string::npos);
  EXPECT_EQ(store->FileContent("file-nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->DeleteFile("file-nope").code(), StatusCode::kNotFound);

  ASSERT_TRUE(store->DeleteFile(added->id).ok());
  EXPECT_EQ(store->GetFile(added->id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->ListFiles("").size(), 1u);
}

TEST(JobStore, CreateBatchCountsInvalidLinesAsFailed) {
  auto store = OpenOrDie(DbPath("create"));
  ASSERT_NE(store, nullptr);
  auto input = store->AddFile("batch", "in.jsonl", "x", kNow);
  ASSERT_TRUE(input.ok());
  BatchRecord proto;
  proto.endpoint = "/v1/chat/completions";
  proto.input_file_id = input->id;
  proto.completion_window = "24h";
  proto.metadata_json = R"({"team":"a"})";
  auto batch = store->CreateBatch(proto, Lines({0, 2, 4}), {Err(1), Err(3)}, kNow, kDay);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->id.substr(0, 6), "batch_");
  EXPECT_EQ(batch->id.size(), 6u + 24u);
  EXPECT_TRUE(IsIdChars(batch->id.substr(6))) << batch->id;
  EXPECT_EQ(batch->state, BatchState::kInProgress);
  EXPECT_EQ(batch->counts.total, 5);
  EXPECT_EQ(batch->counts.failed, 2);
  EXPECT_EQ(batch->counts.completed, 0);
  EXPECT_EQ(batch->created_at, kNow);
  EXPECT_EQ(batch->in_progress_at, kNow);
  EXPECT_EQ(batch->expires_at, kNow + kDay);

  auto stored = store->GetBatch(batch->id);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->endpoint, "/v1/chat/completions");
  EXPECT_EQ(stored->input_file_id, input->id);
  EXPECT_EQ(stored->completion_window, "24h");
  EXPECT_EQ(stored->metadata_json, R"({"team":"a"})");
  EXPECT_EQ(stored->output_file_id, "");
  EXPECT_EQ(stored->error_file_id, "");
  EXPECT_EQ(stored->counts.total, 5);
  EXPECT_EQ(stored->counts.failed, 2);
  EXPECT_EQ(stored->completed_at, 0);
  EXPECT_EQ(store->GetBatch("batch_nope").status().code(), StatusCode::kNotFound);

  // Refused, and nothing half-written: an index twice, an unknown input file.
  EXPECT_EQ(store->CreateBatch(proto, Lines({0, 1}), {Err(1)}, kNow, kDay).status().code(),
            StatusCode::kInvalidArgument);
  proto.input_file_id = "file-nope";
  EXPECT_EQ(store->CreateBatch(proto, Lines({0}), {}, kNow, kDay).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store->ListBatches("", 10).size(), 1u);
  EXPECT_EQ(store->CountByState()[BatchState::kInProgress], 1);
}

TEST(JobStore, PendingLinesComeOldestBatchFirstInLineOrderWithLimitAndSkip) {
  auto store = OpenOrDie(DbPath("pending"));
  ASSERT_NE(store, nullptr);
  const BatchRecord a = MakeBatch(*store, Lines({0, 1, 3}), {Err(2)}, kNow);
  const BatchRecord b = MakeBatch(*store, Lines({0, 1}), {}, kNow + 1);
  const BatchRecord c = MakeBatch(*store, Lines({0}), {}, kNow + 2);
  ASSERT_TRUE(store->Cancel(c.id, kNow + 3).ok());  // a cancelling batch has no pending lines

  using KeyList = std::vector<std::pair<std::string, int64_t>>;
  const auto all = store->PendingLines(100, {});
  EXPECT_EQ(Keys(all), (KeyList{{a.id, 0}, {a.id, 1}, {a.id, 3}, {b.id, 0}, {b.id, 1}}));
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all[0].endpoint, "/v1/completions");
  EXPECT_EQ(all[0].line.custom_id, "req-0");
  EXPECT_EQ(all[0].line.body, R"({"prompt":"line 0"})");

  EXPECT_EQ(Keys(store->PendingLines(2, {})), (KeyList{{a.id, 0}, {a.id, 1}}));
  EXPECT_EQ(Keys(store->PendingLines(2, {{a.id, 0}, {a.id, 3}})), (KeyList{{a.id, 1}, {b.id, 0}}));
  EXPECT_TRUE(store->PendingLines(0, {}).empty());

  ASSERT_TRUE(store->RecordResult(a.id, Ok(1)).value());
  EXPECT_EQ(Keys(store->PendingLines(3, {{b.id, 0}})), (KeyList{{a.id, 0}, {a.id, 3}, {b.id, 1}}));
}

TEST(JobStore, RecordResultCountsALineExactlyOnce) {
  auto store = OpenOrDie(DbPath("once"));
  ASSERT_NE(store, nullptr);
  const BatchRecord batch = MakeBatch(*store, Lines({0, 1}), {Err(2)});

  auto first = store->RecordResult(batch.id, Ok(0));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(*first);
  auto second = store->RecordResult(batch.id, Err(0));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(*second);
  // A line that failed validation already has its result.
  auto invalid = store->RecordResult(batch.id, Ok(2));
  ASSERT_TRUE(invalid.ok()) << invalid.status().ToString();
  EXPECT_FALSE(*invalid);

  auto after = store->GetBatch(batch.id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->counts.completed, 1);
  EXPECT_EQ(after->counts.failed, 1);
  EXPECT_EQ(after->counts.total, 3);

  EXPECT_EQ(store->RecordResult(batch.id, Ok(7)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->RecordResult("batch_nope", Ok(0)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->GetBatch(batch.id)->counts.completed, 1);
  EXPECT_EQ(Keys(store->PendingLines(10, {})),
            (std::vector<std::pair<std::string, int64_t>>{{batch.id, 1}}));
}

TEST(JobStore, RecordResultFromManyThreadsRecordsEachLineOnce) {
  auto store = OpenOrDie(DbPath("threads"));
  ASSERT_NE(store, nullptr);
  std::vector<int64_t> indexes;
  for (int64_t i = 0; i < 20; ++i) indexes.push_back(i);
  std::vector<BatchLine> lines;
  for (int64_t i : indexes) lines.push_back({.index = i, .custom_id = "c", .body = "{}"});
  const BatchRecord batch = MakeBatch(*store, lines);

  std::atomic<int> recorded{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t i : indexes) {
        auto ok = store->RecordResult(batch.id, t % 2 ? Ok(i) : Err(i));
        if (!ok.ok()) ++errors;
        if (ok.ok() && *ok) ++recorded;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(recorded.load(), 20);
  auto after = store->GetBatch(batch.id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->counts.completed + after->counts.failed, 20);
}

TEST(JobStore, CompleteWritesFilesInLineOrderAndWaitsForEveryLine) {
  auto store = OpenOrDie(DbPath("complete"));
  ASSERT_NE(store, nullptr);
  const BatchRecord batch = MakeBatch(*store, Lines({0, 1, 2, 4}), {Err(3)});
  EXPECT_TRUE(store->CompletableBatches().empty());
  ASSERT_TRUE(store->RecordResult(batch.id, Ok(4)).value());
  ASSERT_TRUE(store->RecordResult(batch.id, Ok(0)).value());
  ASSERT_TRUE(store->RecordResult(batch.id, Err(2)).value());

  auto early = store->Complete(batch.id, kNow + 10);
  EXPECT_EQ(early.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(early.status().message().find("1 lines"), std::string::npos)
      << early.status().message();
  EXPECT_EQ(store->GetBatch(batch.id)->state, BatchState::kInProgress);

  ASSERT_TRUE(store->RecordResult(batch.id, Ok(1)).value());
  EXPECT_EQ(store->CompletableBatches(), std::vector<std::string>{batch.id});
  auto done = store->Complete(batch.id, kNow + 20);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->state, BatchState::kCompleted);
  EXPECT_EQ(done->finalizing_at, kNow + 20);
  EXPECT_EQ(done->completed_at, kNow + 20);
  EXPECT_EQ(done->counts.completed, 3);
  EXPECT_EQ(done->counts.failed, 2);
  EXPECT_EQ(Content(*store, done->output_file_id), "ok 0\nok 1\nok 4\n");
  EXPECT_EQ(Content(*store, done->error_file_id), "err 2\nerr 3\n");
  auto output = store->GetFile(done->output_file_id);
  ASSERT_TRUE(output.ok());
  EXPECT_EQ(output->purpose, "batch_output");
  EXPECT_EQ(output->filename, batch.id + "_output.jsonl");
  EXPECT_EQ(store->GetFile(done->error_file_id)->filename, batch.id + "_error.jsonl");

  auto stored = store->GetBatch(batch.id);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->output_file_id, done->output_file_id);
  EXPECT_EQ(stored->state, BatchState::kCompleted);
  EXPECT_EQ(store->Complete(batch.id, kNow + 30).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(store->RecordResult(batch.id, Ok(1)).value());
  EXPECT_TRUE(store->CompletableBatches().empty());
}

TEST(JobStore, CompleteWithoutFailuresWritesNoErrorFile) {
  auto store = OpenOrDie(DbPath("noerrors"));
  ASSERT_NE(store, nullptr);
  const BatchRecord batch = MakeBatch(*store, Lines({0}));
  ASSERT_TRUE(store->RecordResult(batch.id, Ok(0)).value());
  auto done = store->Complete(batch.id, kNow + 1);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(Content(*store, done->output_file_id), "ok 0\n");
  EXPECT_EQ(done->error_file_id, "");
  EXPECT_EQ(store->ListFiles("batch_output").size(), 1u);
}

TEST(JobStore, ReopenedMidBatchResumesWithTheLinesWithoutResults) {
  const std::string path = DbPath("reopen");
  std::string batch_id;
  {
    auto store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    batch_id = MakeBatch(*store, Lines({0, 1, 2, 3}), {Err(4)}).id;
    ASSERT_TRUE(store->RecordResult(batch_id, Ok(2)).value());
    ASSERT_TRUE(store->RecordResult(batch_id, Err(0)).value());
  }
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(Keys(store->PendingLines(10, {})),
            (std::vector<std::pair<std::string, int64_t>>{{batch_id, 1}, {batch_id, 3}}));
  auto batch = store->GetBatch(batch_id);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->counts.completed, 1);
  EXPECT_EQ(batch->counts.failed, 2);
  EXPECT_FALSE(store->RecordResult(batch_id, Ok(2)).value());  // kept: not recorded twice
  ASSERT_TRUE(store->RecordResult(batch_id, Ok(3)).value());
  ASSERT_TRUE(store->RecordResult(batch_id, Ok(1)).value());
  auto done = store->Complete(batch_id, kNow + 5);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(Content(*store, done->output_file_id), "ok 1\nok 2\nok 3\n");
  EXPECT_EQ(Content(*store, done->error_file_id), "err 0\nerr 4\n");
}

TEST(JobStore, SurvivesSigkillMidBatch) {
  const std::string path = DbPath("sigkill");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Killed with the connection open: only what each call committed may count.
    auto opened = JobStore::Open(path);
    if (!opened.ok()) _exit(1);
    JobStore& store = **opened;
    auto input = store.AddFile("batch", "in.jsonl", "x", kNow);
    if (!input.ok()) _exit(2);
    BatchRecord proto;
    proto.endpoint = "/v1/completions";
    proto.input_file_id = input->id;
    proto.completion_window = "24h";
    auto batch = store.CreateBatch(proto, Lines({0, 1, 2}), {}, kNow, kDay);
    if (!batch.ok()) _exit(3);
    if (!store.RecordResult(batch->id, Ok(1)).value()) _exit(4);
    ::kill(::getpid(), SIGKILL);
    _exit(5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;

  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  const auto batches = store->ListBatches("", 10);
  ASSERT_EQ(batches.size(), 1u);
  const std::string& id = batches[0].id;
  EXPECT_EQ(batches[0].counts.completed, 1);
  EXPECT_EQ(Keys(store->PendingLines(10, {})),
            (std::vector<std::pair<std::string, int64_t>>{{id, 0}, {id, 2}}));
  EXPECT_FALSE(store->RecordResult(id, Ok(1)).value());
}

TEST(JobStore, CancelThenFinishCancelWritesPartialFiles) {
  auto store = OpenOrDie(DbPath("cancel"));
  ASSERT_NE(store, nullptr);
  const BatchRecord batch = MakeBatch(*store, Lines({0, 1, 2}));
  ASSERT_TRUE(store->RecordResult(batch.id, Ok(1)).value());
  EXPECT_EQ(store->FinishCancel(batch.id, kNow).status().code(), StatusCode::kFailedPrecondition);

  auto cancelling = store->Cancel(batch.id, kNow + 1);
  ASSERT_TRUE(cancelling.ok()) << cancelling.status().ToString();
  EXPECT_EQ(cancelling->state, BatchState::kCancelling);
  EXPECT_EQ(cancelling->cancelling_at, kNow + 1);
  EXPECT_EQ(store->Cancel(batch.id, kNow + 2)->cancelling_at, kNow + 1);  // unchanged
  EXPECT_TRUE(store->PendingLines(10, {}).empty());
  EXPECT_EQ(store->BatchIdsInState(BatchState::kCancelling), std::vector<std::string>{batch.id});
  // A line that was running when the cancel came still counts.
  ASSERT_TRUE(store->RecordResult(batch.id, Err(0)).value());

  auto cancelled = store->FinishCancel(batch.id, kNow + 3);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().ToString();
  EXPECT_EQ(cancelled->state, BatchState::kCancelled);
  EXPECT_EQ(cancelled->cancelled_at, kNow + 3);
  EXPECT_EQ(cancelled->completed_at, 0);
  EXPECT_EQ(Content(*store, cancelled->output_file_id), "ok 1\n");
  EXPECT_EQ(Content(*store, cancelled->error_file_id), "err 0\n");
  EXPECT_FALSE(store->RecordResult(batch.id, Ok(2)).value());  // too late
  auto again = store->FinishCancel(batch.id, kNow + 9);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cancelled_at, kNow + 3);
  EXPECT_EQ(store->ListFiles("batch_output").size(), 2u);
  EXPECT_EQ(store->Cancel(batch.id, kNow + 9)->state, BatchState::kCancelled);
  EXPECT_EQ(store->Cancel("batch_nope", kNow).status().code(), StatusCode::kNotFound);
}

TEST(JobStore, ExpireOverdueEndsBatchesPastTheirWindowWithPartialFiles) {
  auto store = OpenOrDie(DbPath("expire"));
  ASSERT_NE(store, nullptr);
  const BatchRecord old_batch = MakeBatch(*store, Lines({0, 1}), {}, kNow);
  const BatchRecord new_batch = MakeBatch(*store, Lines({0}), {}, kNow + 100);
  ASSERT_TRUE(store->RecordResult(old_batch.id, Ok(0)).value());

  auto none = store->ExpireOverdue(kNow + kDay - 1);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
  auto expired = store->ExpireOverdue(kNow + kDay);
  ASSERT_TRUE(expired.ok()) << expired.status().ToString();
  EXPECT_EQ(*expired, 1);

  auto batch = store->GetBatch(old_batch.id);
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->state, BatchState::kExpired);
  EXPECT_EQ(batch->expired_at, kNow + kDay);
  EXPECT_EQ(Content(*store, batch->output_file_id), "ok 0\n");
  EXPECT_EQ(batch->error_file_id, "");
  EXPECT_EQ(store->GetBatch(new_batch.id)->state, BatchState::kInProgress);
  EXPECT_EQ(Keys(store->PendingLines(10, {})),
            (std::vector<std::pair<std::string, int64_t>>{{new_batch.id, 0}}));
  const auto counts = store->CountByState();
  EXPECT_EQ(counts.at(BatchState::kExpired), 1);
  EXPECT_EQ(counts.at(BatchState::kInProgress), 1);
  EXPECT_EQ(counts.at(BatchState::kCompleted), 0);
}

TEST(JobStore, DeleteFinishedBeforeRemovesBatchAndItsOutputsButNotItsInput) {
  const std::string path = DbPath("delete");
  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  const BatchRecord batch = MakeBatch(*store, Lines({0}), {Err(1)});
  const BatchRecord running = MakeBatch(*store, Lines({0}));
  ASSERT_TRUE(store->RecordResult(batch.id, Ok(0)).value());
  auto done = store->Complete(batch.id, kNow + 10);
  ASSERT_TRUE(done.ok()) << done.status().ToString();

  auto kept = store->DeleteFinishedBefore(kNow + 10);  // finished at kNow + 10: not before
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, 0);
  auto removed = store->DeleteFinishedBefore(kNow + 11);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, 1);

  EXPECT_EQ(store->GetBatch(batch.id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->GetFile(done->output_file_id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->GetFile(done->error_file_id).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store->GetFile(batch.input_file_id).ok());
  EXPECT_TRUE(store->GetBatch(running.id).ok());
  EXPECT_EQ(store->ListBatches("", 10).size(), 1u);
  // Its lines and results went with it; the running batch's line stayed.
  EXPECT_EQ(QueryText(path, "SELECT COUNT(*) FROM batch_lines"), "1");
  EXPECT_EQ(QueryText(path, "SELECT COUNT(*) FROM batch_results"), "0");
}

TEST(JobStore, DeleteFileRefusesTheInputOfAnUnfinishedBatch) {
  auto store = OpenOrDie(DbPath("inputs"));
  ASSERT_NE(store, nullptr);
  const BatchRecord batch = MakeBatch(*store, Lines({0}));
  const Status refused = store->DeleteFile(batch.input_file_id);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find(batch.id), std::string::npos) << refused.message();
  EXPECT_TRUE(store->GetFile(batch.input_file_id).ok());

  ASSERT_TRUE(store->Cancel(batch.id, kNow).ok());
  EXPECT_EQ(store->DeleteFile(batch.input_file_id).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store->FinishCancel(batch.id, kNow).ok());
  EXPECT_TRUE(store->DeleteFile(batch.input_file_id).ok());
  EXPECT_EQ(store->GetBatch(batch.id)->input_file_id, batch.input_file_id);
}

TEST(JobStore, OpensWalAtVersionTwoAndRefusesNewerSchemasAndForeignFiles) {
  const std::string path = DbPath("newer");
  ASSERT_NE(OpenOrDie(path), nullptr);
  EXPECT_EQ(QueryText(path, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(QueryText(path, "PRAGMA user_version"), "2");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto newer = JobStore::Open(path);
  EXPECT_EQ(newer.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(newer.status().message().find("99"), std::string::npos) << newer.status().message();

  const std::string foreign = DbPath("foreign");
  ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t (x)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  EXPECT_EQ(JobStore::Open(foreign).status().code(), StatusCode::kFailedPrecondition);

  const std::string text = DbPath("text");
  std::ofstream(text) << "this is not a database, not even close to one; just some text\n";
  EXPECT_EQ(JobStore::Open(text).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(JobStore::Open(::testing::TempDir() + "no/such/dir/jobs.db").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(JobStore::Open("").status().code(), StatusCode::kInvalidArgument);
}

TEST(JobStore, ListBatchesPagesNewestFirstAfterAnId) {
  auto store = OpenOrDie(DbPath("paging"));
  ASSERT_NE(store, nullptr);
  std::vector<std::string> ids;  // oldest first; all created in the same second
  for (int i = 0; i < 5; ++i) ids.push_back(MakeBatch(*store, Lines({0}), {}, kNow).id);

  const auto ids_of = [](const std::vector<BatchRecord>& batches) {
    std::vector<std::string> out;
    for (const BatchRecord& b : batches) out.push_back(b.id);
    return out;
  };
  EXPECT_EQ(ids_of(store->ListBatches("", 2)), (std::vector<std::string>{ids[4], ids[3]}));
  EXPECT_EQ(ids_of(store->ListBatches(ids[3], 2)), (std::vector<std::string>{ids[2], ids[1]}));
  EXPECT_EQ(ids_of(store->ListBatches(ids[1], 2)), (std::vector<std::string>{ids[0]}));
  EXPECT_TRUE(store->ListBatches(ids[0], 2).empty());
  EXPECT_TRUE(store->ListBatches("batch_nope", 2).empty());
  EXPECT_TRUE(store->ListBatches("", 0).empty());
  EXPECT_EQ(store->ListBatches("", 100).size(), 5u);
}

TEST(JobStore, ListsOnlyTheOwnersFilesAndBatchesAndOutputsInheritTheOwner) {
  auto store = OpenOrDie(DbPath("owners"));
  ASSERT_NE(store, nullptr);
  const BatchRecord alice = MakeBatch(*store, Lines({0}), {}, kNow, "alice");
  const BatchRecord bob = MakeBatch(*store, Lines({0}), {}, kNow, "bob");
  const BatchRecord nobody = MakeBatch(*store, Lines({0}), {}, kNow);
  EXPECT_EQ(store->GetBatch(alice.id)->owner, "alice");
  EXPECT_EQ(store->GetFile(alice.input_file_id)->owner, "alice");

  const auto batch_ids = [&](std::string_view owner) {
    std::vector<std::string> ids;
    for (const BatchRecord& b : store->ListBatches("", 10, owner)) ids.push_back(b.id);
    return ids;
  };
  EXPECT_EQ(batch_ids("alice"), std::vector<std::string>{alice.id});
  EXPECT_EQ(batch_ids("bob"), std::vector<std::string>{bob.id});
  EXPECT_EQ(batch_ids(""), std::vector<std::string>{nobody.id});
  EXPECT_TRUE(batch_ids("carol").empty());
  // Paging after another owner's batch gives nothing.
  EXPECT_TRUE(store->ListBatches(bob.id, 10, "alice").empty());

  ASSERT_TRUE(store->RecordResult(alice.id, Ok(0)).ok());
  const StatusOr<BatchRecord> done = store->Complete(alice.id, kNow + 5);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(store->GetFile(done->output_file_id)->owner, "alice");
  std::vector<std::string> alice_files;
  for (const FileRecord& f : store->ListFiles("", "alice")) alice_files.push_back(f.id);
  EXPECT_EQ(alice_files, (std::vector<std::string>{done->output_file_id, alice.input_file_id}));
  EXPECT_EQ(store->ListFiles("batch", "bob").size(), 1u);
  EXPECT_TRUE(store->ListFiles("", "carol").empty());
}

TEST(JobStore, AVersionOneFileIsMigratedWithItsJobsOwnedByNobody) {
  const std::string path = DbPath("v1");
  std::string batch_id;
  {
    auto store = OpenOrDie(path);
    ASSERT_NE(store, nullptr);
    batch_id = MakeBatch(*store, Lines({0, 1})).id;
  }
  // Back to version 1's tables: no owner columns.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  for (const char* sql : {"ALTER TABLE files DROP COLUMN owner",
                          "ALTER TABLE batches DROP COLUMN owner", "PRAGMA user_version = 1"}) {
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  }
  sqlite3_close(db);

  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(QueryText(path, "PRAGMA user_version"), "2");
  const StatusOr<BatchRecord> batch = store->GetBatch(batch_id);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->owner, "");
  EXPECT_EQ(store->ListBatches("", 10, "").size(), 1u);
  EXPECT_EQ(store->PendingLines(10, {}).size(), 2u);  // the job resumes
  EXPECT_EQ(MakeBatch(*store, Lines({0}), {}, kNow, "alice").owner, "alice");
}

TEST(BatchState, NamesAreTheApiSpellings) {
  EXPECT_EQ(BatchStateName(BatchState::kValidating), "validating");
  EXPECT_EQ(BatchStateName(BatchState::kFailed), "failed");
  EXPECT_EQ(BatchStateName(BatchState::kInProgress), "in_progress");
  EXPECT_EQ(BatchStateName(BatchState::kFinalizing), "finalizing");
  EXPECT_EQ(BatchStateName(BatchState::kCompleted), "completed");
  EXPECT_EQ(BatchStateName(BatchState::kExpired), "expired");
  EXPECT_EQ(BatchStateName(BatchState::kCancelling), "cancelling");
  EXPECT_EQ(BatchStateName(BatchState::kCancelled), "cancelled");
}

}  // namespace
}  // namespace strata::jobs
