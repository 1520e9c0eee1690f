"""strata-inspect against the gguf package's reader on the real model, and on broken files."""
import subprocess

import gguf

from conftest import tool


def parse_tensor_table(text):
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("== tensors"))
    rows = {}
    for line in lines[start + 2:]:
        if not line.strip():
            break
        name, rest = line.split(" ", 1)
        shape = rest[rest.index("["):rest.index("]") + 1]
        after = rest[rest.index("]") + 1:].split()
        rows[name] = (eval(shape), after[0], int(after[1]))
    return rows


def test_inspect_lists_every_tensor_and_key_like_the_reference(build_dir, model_path):
    out = subprocess.run([tool(build_dir, "strata-inspect"), model_path], check=True,
                         capture_output=True, text=True).stdout
    reader = gguf.GGUFReader(model_path)
    rows = parse_tensor_table(out)
    assert len(rows) == len(reader.tensors)
    for t in reader.tensors:
        shape, type_name, elements = rows[t.name]
        assert shape == [int(d) for d in t.shape], t.name
        assert type_name == t.tensor_type.name, t.name
        assert elements == int(t.n_elements), t.name
    for key in reader.fields:
        if key.startswith("GGUF."):
            continue  # the reader's pseudo-fields for the header
        assert f"\n{key} " in out, key
    assert "architecture: gemma3" in out
    assert f"tensors: {len(reader.tensors)}, parameters: " in out


def test_inspect_fails_with_one_line_on_a_broken_file(build_dir, model_path, tmp_path):
    data = model_path.read_bytes()[:4096]
    for name, content in [("truncated.gguf", data), ("empty.gguf", b""),
                          ("text.gguf", b"hello world\n")]:
        path = tmp_path / name
        path.write_bytes(content)
        proc = subprocess.run([tool(build_dir, "strata-inspect"), path], capture_output=True,
                              text=True)
        assert proc.returncode == 1, name
        assert proc.stdout == "", name
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith("strata-inspect: "), proc.stderr
    proc = subprocess.run([tool(build_dir, "strata-inspect"), tmp_path / "missing.gguf"],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "NOT_FOUND" in proc.stderr
