#include "strata/engine/draft_model_proposer.h"

#include <algorithm>
#include <string>

#include "strata/common/check.h"
#include "strata/common/logging.h"

namespace strata::engine {

StatusOr<std::unique_ptr<DraftModelProposer>> DraftModelProposer::Create(
    backend::Backend* draft, int64_t target_vocab_size) {
  STRATA_CHECK(draft != nullptr);
  if (draft->config().vocab_size != target_vocab_size) {
    return InvalidArgumentError("the draft model's vocabulary has " +
                                std::to_string(draft->config().vocab_size) +
                                " tokens, the target's " + std::to_string(target_vocab_size) +
                                ": a draft model must share the target's vocabulary");
  }
  if (draft->kv_geometry().num_blocks < 1) {
    return InvalidArgumentError("the draft model's KV cache holds no block");
  }
  return std::unique_ptr<DraftModelProposer>(new DraftModelProposer(draft));
}

DraftModelProposer::DraftModelProposer(backend::Backend* draft)
    : draft_(draft), pool_(draft->kv_geometry().num_blocks) {}

void DraftModelProposer::Propose(kv::SequenceId id, std::span<const int32_t> tokens,
                                 int32_t max_tokens, std::vector<int32_t>* draft) {
  const DraftRequest request{id, tokens, max_tokens, draft};
  ProposeAll(std::span<const DraftRequest>(&request, 1));
}

void DraftModelProposer::Forget(kv::SequenceId id) {
  const auto it = states_.find(id);
  if (it == states_.end()) return;
  it->second.table.ReleaseAll(&pool_);
  states_.erase(it);
}

bool DraftModelProposer::Reserve(State* state, int64_t tokens, std::span<const DraftRequest> step) {
  const int32_t needed = state->table.BlocksNeeded(tokens);
  if (needed == 0) return true;
  if (pool_.num_free() < needed) {
    // Drop sequences this step does not draft for (finished ones the engine has not reported,
    // or ones waiting): their KV is only a head start.
    for (auto it = states_.begin(); it != states_.end() && pool_.num_free() < needed;) {
      const bool in_step = std::any_of(step.begin(), step.end(),
                                       [&](const DraftRequest& r) { return r.id == it->first; });
      if (in_step) {
        ++it;
        continue;
      }
      it->second.table.ReleaseAll(&pool_);
      it = states_.erase(it);
    }
  }
  std::vector<kv::BlockId> ids;
  if (!pool_.Allocate(needed, &ids)) return false;
  state->table.Append(ids);
  return true;
}

bool DraftModelProposer::Run(std::vector<Job>& jobs, std::vector<int32_t>* next) {
  backend::Batch batch;
  int64_t tokens = 0;
  for (const Job& job : jobs) {
    batch.sequences.push_back(
        {job.slice, job.start, job.state->table.blocks(), backend::LogitsWanted::kLast});
    tokens += static_cast<int64_t>(job.slice.size());
  }
  const Status status = draft_->Forward(batch, &logits_);
  ++forward_passes_;
  forward_tokens_ += tokens;
  if (!status.ok()) {
    LogWarn("a draft model forward failed; no drafts this step", {{"error", status.ToString()}});
    return false;
  }
  const auto vocab = static_cast<size_t>(draft_->config().vocab_size);
  next->assign(jobs.size(), 0);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const float* row = logits_.data() + j * vocab;
    // Greedy, ties to the lowest id (the sampler's rule): a deterministic guess.
    (*next)[j] = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
  }
  return true;
}

void DraftModelProposer::ProposeAll(std::span<const DraftRequest> requests) {
  const int64_t context = draft_->config().context_length;
  std::vector<Job> jobs;
  for (const DraftRequest& r : requests) {
    const auto len = static_cast<int64_t>(r.tokens.size());
    // The draft's last token is never run: positions up to len + max_tokens - 2.
    if (r.max_tokens < 1 || len < 1 || len + r.max_tokens - 1 > context) continue;
    State& state = states_.try_emplace(r.id, draft_->kv_geometry().block_size).first->second;
    // Keep the KV of the prefix the sequence still shares; at least its last token runs again
    // (its logits give the first draft token).
    const auto shared = static_cast<int64_t>(
        std::mismatch(state.cached.begin(), state.cached.end(), r.tokens.begin(), r.tokens.end())
            .first -
        state.cached.begin());
    const int64_t keep = std::min(shared, len - 1);
    state.cached.resize(static_cast<size_t>(keep));
    const int32_t block_size = state.table.block_size();
    state.table.TruncateTo(std::min(state.table.num_blocks(),
                                    static_cast<int32_t>((keep + block_size - 1) / block_size)),
                           &pool_);
    if (!Reserve(&state, len + r.max_tokens - 1, requests)) continue;
    Job job{&r, &state, std::vector<int32_t>(r.tokens.begin() + keep, r.tokens.end()), keep};
    jobs.push_back(std::move(job));
  }
  std::vector<int32_t> next;
  for (int32_t pass = 0; !jobs.empty(); ++pass) {
    if (!Run(jobs, &next)) {
      // The drafts of this step are lost; the caches hold what they held before the pass.
      for (Job& job : jobs) job.request->draft->resize(job.request->draft->size() - pass);
      return;
    }
    std::vector<Job> more;
    for (size_t j = 0; j < jobs.size(); ++j) {
      Job& job = jobs[j];
      job.state->cached.insert(job.state->cached.end(), job.slice.begin(), job.slice.end());
      job.request->draft->push_back(next[j]);
      if (pass + 1 >= job.request->max_tokens) continue;
      job.start += static_cast<int64_t>(job.slice.size());
      job.slice.assign(1, next[j]);
      more.push_back(std::move(job));
    }
    jobs.swap(more);
  }
}

}  // namespace strata::engine
