"""Shared fixtures of the fidelity tests: the build folder, the real model and the embedding model."""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def build_dir() -> Path:
    path = Path(os.environ.get("STRATA_BUILD_DIR", ROOT / "build"))
    assert path.is_dir(), f"build folder {path} is missing: run scripts/build"
    return path


@pytest.fixture(scope="session")
def model_path() -> Path:
    path = Path(os.environ.get("STRATA_MODEL", ROOT / "models" / "gemma-3-270m-q4_k_m.gguf"))
    assert path.is_file(), f"the real model {path} is missing: run scripts/setup"
    return path


@pytest.fixture(scope="session")
def embedding_model_dir() -> Path:
    path = Path(os.environ.get("STRATA_EMBEDDING_MODEL",
                               ROOT / "models" / "all-minilm-l6-v2"))
    assert (path / "model.safetensors").is_file(), \
        f"the embedding model {path} is missing: run scripts/setup"
    return path


def tool(build_dir: Path, name: str) -> Path:
    path = build_dir / "src" / "tools" / name
    assert path.is_file(), f"{path} is missing: run scripts/build"
    return path
