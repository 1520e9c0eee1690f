#!/usr/bin/env bash
# The Generation service from the shell with grpcurl (https://github.com/fullstorydev/grpcurl),
# through server reflection: no .proto file needed.
#
#   examples/grpcurl.sh [HOST:PORT]        # default: $STRATA_ADDR or localhost:50051
set -euo pipefail

addr="${1:-${STRATA_ADDR:-localhost:50051}}"
command -v grpcurl >/dev/null || { echo "grpcurl is not installed" >&2; exit 1; }

run() {
  echo "\$ grpcurl $*" >&2
  grpcurl "$@"
  echo >&2
}

# What the server offers.
run -plaintext "$addr" list
run -plaintext "$addr" list strata.v1.Generation
run -plaintext "$addr" describe strata.v1.Generation
run -plaintext "$addr" describe strata.v1.SamplingParams

# Health: the whole server, then the generation service (SERVING / NOT_SERVING).
run -plaintext "$addr" grpc.health.v1.Health/Check
run -plaintext -d '{"service": "strata.v1.Generation"}' "$addr" grpc.health.v1.Health/Check

# Model, limits and backend.
run -plaintext "$addr" strata.v1.Generation/GetModelInfo

# A greedy completion, then a chat turn streamed message by message.
run -plaintext \
  -d '{"prompt": "Once upon a time,", "sampling": {"max_tokens": 16, "temperature": 0}}' \
  "$addr" strata.v1.Generation/Generate
run -plaintext -d '{
    "chat": {"messages": [{"role": "user", "content": "Write a haiku about the sea."}]},
    "sampling": {"max_tokens": 48, "temperature": 0.7, "seed": 42}
  }' "$addr" strata.v1.Generation/GenerateStream

# The tokenizer both ways.
run -plaintext -d '{"text": "Hello world", "add_special": true}' \
  "$addr" strata.v1.Generation/Tokenize
run -plaintext -d '{"token_ids": [9259, 1902]}' "$addr" strata.v1.Generation/Detokenize

# A bad field is INVALID_ARGUMENT naming it (grpcurl exits non-zero: shown, not fatal).
run -plaintext -d '{"prompt": "Hi", "sampling": {"temperature": -1}}' \
  "$addr" strata.v1.Generation/Generate || true
