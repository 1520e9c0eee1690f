"""Bit-exact fidelity of strata-dequant against gguf-py's reference dequantization.

Compares the uint32 bit patterns of strata's float32 output with gguf.quants.dequantize
(package gguf 0.19.0) on
  (a) random blocks of each of the 13 supported formats, fed through `strata-dequant --raw`, and
  (b) every tensor of the real model, through `strata-dequant MODEL TENSOR` and gguf.GGUFReader.

NaN rule: the random blocks keep their fp16 scale fields as drawn, so some scales are NaN or
infinite. Where the reference value is NaN, strata's must be NaN too but may differ in sign and
payload: which NaN a product or sum returns depends on operand order, which neither numpy nor a
compiler promises. Every other element (zeros, subnormals, infinities included) must match bit
for bit. The plain types (F32, F16, BF16) and the blocks with extreme-but-finite scales are
compared strictly, NaN payloads included. The real model is compared with the NaN rule but has
no NaN (a NaN there is reported as a failure of its own).

Environment: STRATA_BUILD_DIR (the CMake build folder holding src/tools/strata-dequant) and
STRATA_MODEL (the real model; scripts/setup fetches it).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import gguf
from gguf import GGMLQuantizationType as T

SEED = 20240601
RANDOM_BLOCKS = 256

# Byte offsets of the fp16 scale fields in each block format (ggml's block_* structs).
SCALE_OFFSETS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
}
PLAIN_TYPES = [T.F32, T.F16, T.BF16]
ALL_TYPES = PLAIN_TYPES + list(SCALE_OFFSETS)

# fp16 scales at the edges of the finite range: +-65504, the smallest and largest subnormals,
# the smallest normal, signed zeros and one.
EXTREME_FP16 = np.array(
    [0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x0000, 0x8000, 0x3C00],
    dtype=np.uint16,
)


# ---- Helpers ------------------------------------------------------------------------------


def tool() -> Path:
    build_dir = os.environ.get("STRATA_BUILD_DIR")
    if not build_dir:
        pytest.fail("STRATA_BUILD_DIR is not set (ctest sets it; or export it to the build folder)")
    path = Path(build_dir) / "src" / "tools" / "strata-dequant"
    if not path.is_file():
        pytest.fail(f"{path} does not exist: build the strata-dequant target first")
    return path


def model_path() -> Path:
    default = Path(__file__).resolve().parents[2] / "models" / "gemma-3-270m-q4_k_m.gguf"
    path = Path(os.environ.get("STRATA_MODEL", default))
    if not path.is_file():
        pytest.fail(f"the real model {path} is missing: run scripts/setup to fetch it")
    return path


def reference(data: np.ndarray, qtype: T) -> np.ndarray:
    with np.errstate(all="ignore"):  # inf * 0 and friends in the NaN-scale blocks
        return np.ascontiguousarray(gguf.quants.dequantize(data, qtype), dtype=np.float32).ravel()


def first_mismatch(ours: np.ndarray, ref: np.ndarray, nan_rule: bool) -> str | None:
    """None when equal; otherwise a description of the first and the worst mismatch."""
    if ours.shape != ref.shape:
        return f"{ours.size} values, expected {ref.size}"
    ours_bits = ours.view(np.uint32)
    ref_bits = ref.view(np.uint32)
    bad = ours_bits != ref_bits
    if nan_rule:
        bad &= ~(np.isnan(ours) & np.isnan(ref))
    if not bad.any():
        return None
    idx = np.flatnonzero(bad)

    def show(i: int) -> str:
        return (
            f"index {i}: strata {ours[i]!r} (0x{int(ours_bits[i]):08x}) vs "
            f"gguf {ref[i]!r} (0x{int(ref_bits[i]):08x})"
        )

    with np.errstate(all="ignore"):
        diff = np.abs(ours[idx].astype(np.float64) - ref[idx].astype(np.float64))
    diff = np.where(np.isnan(diff), np.inf, diff)
    worst = int(idx[int(np.argmax(diff))])
    return f"{idx.size} mismatching values; first at {show(int(idx[0]))}; worst at {show(worst)}"


def run_raw(qtype: T, raw: np.ndarray, num_elements: int) -> np.ndarray:
    result = subprocess.run(
        [str(tool()), "--raw", qtype.name, str(num_elements)],
        input=raw.tobytes(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return np.frombuffer(result.stdout, dtype="<f4")


def random_blocks(qtype: T, rng: np.random.Generator) -> np.ndarray:
    _, type_size = gguf.GGML_QUANT_SIZES[qtype]
    return rng.integers(0, 256, size=(RANDOM_BLOCKS, type_size), dtype=np.uint8)


def check_raw(qtype: T, blocks: np.ndarray, nan_rule: bool) -> None:
    block_size, _ = gguf.GGML_QUANT_SIZES[qtype]
    ours = run_raw(qtype, blocks, blocks.shape[0] * block_size)
    problem = first_mismatch(ours, reference(blocks, qtype), nan_rule)
    assert problem is None, f"{qtype.name}: {problem}"


# ---- (a) Random blocks ------------------------------------------------------------------


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
def test_random_blocks_match_gguf(qtype: T) -> None:
    rng = np.random.default_rng([SEED, int(qtype)])
    blocks = random_blocks(qtype, rng)
    # Plain types have no scales: every bit pattern, NaN payloads included, must survive.
    check_raw(qtype, blocks, nan_rule=qtype not in PLAIN_TYPES)


@pytest.mark.parametrize("qtype", list(SCALE_OFFSETS), ids=lambda t: t.name)
def test_extreme_finite_scales_match_gguf_strictly(qtype: T) -> None:
    rng = np.random.default_rng([SEED, int(qtype), 1])
    blocks = random_blocks(qtype, rng)
    for offset in SCALE_OFFSETS[qtype]:
        scales = rng.choice(EXTREME_FP16, size=RANDOM_BLOCKS)
        blocks[:, offset : offset + 2] = scales.astype("<u2").view(np.uint8).reshape(-1, 2)
    assert not np.isnan(reference(blocks, qtype)).any(), "test bug: finite scales gave NaN"
    check_raw(qtype, blocks, nan_rule=False)


def test_every_f16_bit_pattern_matches_numpy() -> None:
    blocks = np.arange(1 << 16, dtype=np.uint32).astype("<u2").view(np.uint8).reshape(-1, 2)
    check_raw(T.F16, blocks, nan_rule=False)


def test_every_bf16_bit_pattern_matches_gguf() -> None:
    blocks = np.arange(1 << 16, dtype=np.uint32).astype("<u2").view(np.uint8).reshape(-1, 2)
    check_raw(T.BF16, blocks, nan_rule=False)


# ---- Tool errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, stdin",
    [
        (["--raw", "Q8_0", "32"], b"\0" * 33),  # wrong byte count
        (["--raw", "Q8_0", "31"], b"\0" * 34),  # not a multiple of the block size
        (["--raw", "IQ2_XXS", "256"], b"\0" * 66),  # unsupported type
        (["--raw", "NOPE", "32"], b""),  # unknown type name
        (["--raw", "Q8_0", "-1"], b""),  # bad count
        (["--bogus"], b""),  # usage
    ],
    ids=["size", "multiple", "unsupported", "unknown-type", "bad-count", "usage"],
)
def test_tool_errors_are_one_line_and_exit_1(args: list[str], stdin: bytes) -> None:
    result = subprocess.run([str(tool()), *args], input=stdin, capture_output=True, timeout=60)
    assert result.returncode == 1
    assert result.stdout == b""
    message = result.stderr.decode(errors="replace")
    assert message.endswith("\n") and message.count("\n") == 1, repr(message)


def test_unknown_tensor_is_an_error() -> None:
    result = subprocess.run(
        [str(tool()), str(model_path()), "no.such.tensor"], capture_output=True, timeout=60
    )
    assert result.returncode == 1
    assert b"no.such.tensor" in result.stderr


# ---- (b) The real model -----------------------------------------------------------------


@pytest.fixture(scope="module")
def reader() -> gguf.GGUFReader:
    return gguf.GGUFReader(model_path())


def test_list_matches_gguf_reader(reader: gguf.GGUFReader) -> None:
    result = subprocess.run(
        [str(tool()), "--list", str(model_path())], capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    listed = [line.split(" ") for line in result.stdout.decode().splitlines()]
    expected = [[t.name, t.tensor_type.name, str(int(t.n_elements))] for t in reader.tensors]
    assert listed == expected


# Rows compared per step, so the largest tensor (token_embd, 262144 x 640) never sits in memory
# twice over.
CHUNK_ELEMENTS = 1 << 22


def compare_tensor(path: Path, tensor) -> str | None:
    data = tensor.data
    rows = data.reshape(-1, data.shape[-1]) if data.ndim > 1 else data.reshape(1, -1)
    elements_per_row = int(tensor.n_elements) // rows.shape[0]
    rows_per_chunk = max(1, CHUNK_ELEMENTS // elements_per_row)
    with subprocess.Popen(
        [str(tool()), str(path), tensor.name], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        problem = None
        for start in range(0, rows.shape[0], rows_per_chunk):
            chunk = rows[start : start + rows_per_chunk]
            ref = reference(chunk, tensor.tensor_type)
            want = ref.size * 4
            raw = proc.stdout.read(want)
            ours = np.frombuffer(raw, dtype="<f4")
            problem = first_mismatch(ours, ref, nan_rule=True)
            if problem is None and np.isnan(ref).any():
                problem = "the reference holds NaN"
            if problem is not None:
                offset = start * elements_per_row
                problem = f"{problem} (indices from element {offset})"
                proc.kill()
                break
        else:
            if proc.stdout.read(1):
                problem = "strata wrote more values than the tensor holds"
        stderr = proc.stderr.read().decode(errors="replace")
        rc = proc.wait()
    if problem is None and rc != 0:
        problem = f"exit status {rc}"
    if problem is not None and stderr.strip():
        problem = f"{problem}; strata-dequant said: {stderr.strip()}"
    return problem


def test_every_model_tensor_matches_gguf(reader: gguf.GGUFReader) -> None:
    path = model_path()
    assert len(reader.tensors) > 0
    failures = []
    for tensor in reader.tensors:
        problem = compare_tensor(path, tensor)
        if problem is not None:
            failures.append(f"{tensor.name} ({tensor.tensor_type.name}): {problem}")
    assert not failures, "\n".join(failures)
