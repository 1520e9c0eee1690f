#!/usr/bin/env python3
"""The Generation service through plain generated stubs (grpcio + protobuf, no wrapper): what
any gRPC language does with proto/strata/v1/generation.proto.

Generate the stubs once (this script does it itself into a temporary folder when
`strata.v1` is not importable):

    python -m grpc_tools.protoc -I proto --python_out=. --grpc_python_out=. \
        proto/strata/v1/generation.proto
    python examples/grpc_raw.py [HOST:PORT]           # default: $STRATA_ADDR or localhost:50051
"""
import importlib
import os
import sys
import tempfile
from pathlib import Path

import grpc

PROTO_DIR = Path(__file__).resolve().parents[1] / "proto"


def load_stubs():
    try:
        return (importlib.import_module("strata.v1.generation_pb2"),
                importlib.import_module("strata.v1.generation_pb2_grpc"))
    except ImportError:
        pass
    from grpc_tools import protoc  # pip install grpcio-tools

    out = tempfile.mkdtemp(prefix="strata-stubs-")
    if protoc.main(["protoc", f"-I{PROTO_DIR}", f"--python_out={out}", f"--grpc_python_out={out}",
                    str(PROTO_DIR / "strata" / "v1" / "generation.proto")]) != 0:
        sys.exit(f"protoc failed on {PROTO_DIR}/strata/v1/generation.proto")
    sys.path.insert(0, out)
    return (importlib.import_module("strata.v1.generation_pb2"),
            importlib.import_module("strata.v1.generation_pb2_grpc"))


def main() -> int:
    target = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("STRATA_ADDR",
                                                                  "localhost:50051")
    pb, pb_grpc = load_stubs()
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.GenerationStub(channel)
        info = stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10)
        print(f"{info.name}: context {info.context_length} tokens, backend {info.backend}")

        # Unset optional fields take the server's defaults; temperature 0 is greedy.
        request = pb.GenerateRequest(
            prompt="Once upon a time,",
            sampling=pb.SamplingParams(max_tokens=32, temperature=0.0, stop=["\n\n"]),
            request_id="raw-example-1")
        reply = stub.Generate(request, timeout=120)
        print(f"\n[Generate] {reply.text!r}")
        print(f"  finish_reason={pb.FinishReason.Name(reply.finish_reason)} "
              f"prompt_tokens={reply.usage.prompt_tokens} "
              f"completion_tokens={reply.usage.completion_tokens} "
              f"ttft={reply.timing.time_to_first_token_seconds:.3f}s")

        print("\n[GenerateStream] ", end="", flush=True)
        chat = pb.ChatMessages(messages=[pb.ChatMessage(role="user", content="Name three colors.")])
        for message in stub.GenerateStream(
                pb.GenerateRequest(chat=chat, sampling=pb.SamplingParams(max_tokens=48)),
                timeout=120):
            print(message.text, end="", flush=True)
            if message.finish_reason != pb.FINISH_REASON_UNSPECIFIED:
                print(f"\n  finish_reason={pb.FinishReason.Name(message.finish_reason)} "
                      f"completion_tokens={message.usage.completion_tokens}")

        tokens = stub.Tokenize(pb.TokenizeRequest(text="Hello world"), timeout=10)
        print(f"\n[Tokenize] {list(tokens.token_ids)} pieces={list(tokens.pieces)}")

        try:
            stub.Generate(pb.GenerateRequest(prompt="Hi", sampling=pb.SamplingParams(top_p=2)),
                          timeout=10)
        except grpc.RpcError as e:
            print(f"\n[error] {e.code().name}: {e.details()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
