"""The release's set-up: one uv command and one pip command per OS, from one pyproject.toml, each with
its way out where PyTorch's index cannot be reached.

uv: the release's ``pyproject.toml`` sends torch to PyTorch's CPU index on Linux only (an explicit
index, asked for torch alone) and resolves against PyPI for macOS (Apple silicon) and Windows
(``uv pip compile --python-platform``; skipped without uv or without network).

The Linux lines of the release README run as written, PyTorch's address aside: a local HTTP index
serving a stand-in torch wheel (``2.13.0+cpu``, needing filelock as torch does) takes PyTorch's place,
or a closed port where the index is unreachable; PyPI is the local index pip is configured with (the
tests skip without one), plus a stand-in ``torch 2.13.0`` for the way out.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the kit runs on 3.11+, tomli ships with pytest's dependencies on 3.10
    import tomli as tomllib

KIT = Path(__file__).resolve().parents[3]
PROJECT = KIT / "grader" / "release" / "templates" / "pyproject.toml"
README = KIT / "grader" / "release" / "templates" / "README.md"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
NETWORK_TROUBLE = ("dns error", "Failed to fetch", "error sending request", "Could not connect", "timed out")


def test_torch_comes_from_the_cpu_index_on_linux_only_and_nothing_else_does():
    uv = tomllib.loads(PROJECT.read_text(encoding="utf-8"))["tool"]["uv"]
    assert uv["sources"] == {"torch": [{"index": "pytorch-cpu", "marker": "sys_platform == 'linux'"}]}
    assert uv["index"] == [{"name": "pytorch-cpu", "url": CPU_INDEX, "explicit": True}]


@pytest.mark.parametrize("platform", ["aarch64-apple-darwin", "x86_64-pc-windows-msvc"])
def test_the_release_resolves_with_uv_for_macos_and_windows(platform, tmp_path):
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is None:
        pytest.skip("uv is not installed (pip install uv; the dev extra has it)")
    shutil.copyfile(PROJECT, tmp_path / "pyproject.toml")
    run = subprocess.run([uv, "pip", "compile", "pyproject.toml", "--python-platform", platform,
                          "--python-version", "3.11", "--quiet", "--no-header"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "MACOSX_DEPLOYMENT_TARGET": "14.0"})  # torch 2.13 needs macOS 14
    if run.returncode and any(words in run.stderr for words in NETWORK_TROUBLE):
        pytest.skip(f"no network to PyPI: {run.stderr.strip().splitlines()[-1]}")
    assert run.returncode == 0, run.stderr
    pins = dict(re.findall(r"^([a-z]+)==(\S+)$", run.stdout, flags=re.MULTILINE))
    assert {"torch", "einops", "numpy", "pytest", "hypothesis", "jaxtyping"} <= pins.keys(), run.stdout
    assert (2, 6) <= tuple(map(int, pins["torch"].split(".")[:2])) <= (2, 13), pins["torch"]


def _commands() -> dict[str, str]:
    """The release README's Linux set-up lines and their ways out, as a student copies them."""
    from grader.release import setup_commands

    text = README.read_text(encoding="utf-8")
    commands = setup_commands(text)
    uv_out, pip_out = re.findall(r"cannot be reached[^`]*run `([^`]+)`", text)
    return {"uv": next(c for c in commands if c.startswith("uv sync")), "uv way out": uv_out,
            "pip": commands[commands.index("# Linux") + 1], "pip way out": pip_out}


def _wheel(folder: Path, version: str) -> Path:
    """A stand-in torch wheel: ``torch.__version__`` is ``version``; it needs filelock, as torch does."""
    dist = f"torch-{version}.dist-info"
    files = {"torch/__init__.py": f"__version__ = {version!r}\n",
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\nRequires-Dist: filelock\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: kit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    digest = {name: base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
              for name, text in files.items()}
    record = "".join(f"{name},sha256={digest[name]},{len(text)}\n" for name, text in files.items())
    record += f"{dist}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in {**files, f"{dist}/RECORD": record}.items():
            wheel.writestr(name, text)
    return path


class _Index(http.server.ThreadingHTTPServer):
    """PyTorch's CPU index, standing in: a simple index of one stand-in torch, which logs what is asked."""

    def __init__(self, root: Path):
        wheel = _wheel(root / "torch", "2.13.0+cpu")
        (root / "torch" / "index.html").write_text(f'<a href="{wheel.name.replace("+", "%2B")}">{wheel.name}</a>\n')
        self.asked: list[str] = []
        index = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(root), **kwargs)

            def log_message(self, *args):
                index.asked.append(self.path)

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


def _closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/"


def _local_pypi() -> str:
    """The first local (file://) index pip is configured with: PyPI, standing in."""
    config = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    found = re.findall(r"file://\S+?(?=['\s])", config)
    if not found:
        pytest.skip("pip is configured with no local index to stand in for PyPI")
    return found[0]


def _student(tmp_path: Path, pypi_torch: Path) -> tuple[Path, dict[str, str]]:
    """A release folder (its pyproject and a package) and the environment of a student's shell here: PyPI is
    the local index, with a stand-in torch 2.13.0 beside it (``_with_pypi_torch``; none otherwise)."""
    folder = tmp_path / "release"
    (folder / "assignment").mkdir(parents=True)
    (folder / "assignment" / "__init__.py").write_text("")
    # uv locks for every platform and Python the project allows; the local index serves this machine's alone
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    (folder / "pyproject.toml").write_text(PROJECT.read_text() + "\n[tool.uv]\nenvironments = "
                                           f"[\"sys_platform == 'linux' and python_version == '{python}'\"]\n")
    pypi = _local_pypi()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("VIRTUAL_ENV", "UV_", "PYTHONPATH"))}
    (tmp_path / "no-wheels").mkdir()
    env |= {"PIP_FIND_LINKS": str(tmp_path / "no-wheels"), "PIP_INDEX_URL": pypi, "UV_DEFAULT_INDEX": pypi,
            "KIT_PYPI_TORCH": str(pypi_torch.parent),
            "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_PYTHON": python,
            "PATH": os.pathsep.join([str(tmp_path / "bin"), *(p for p in env["PATH"].split(os.pathsep)
                                                              if not p.startswith(sys.prefix))])}
    (tmp_path / "bin").mkdir()
    if shutil.which("uv"):  # uv as a student has it, without the kit's virtual environment on PATH
        (tmp_path / "bin" / "uv").symlink_to(shutil.which("uv"))
    return folder, env


def _with_pypi_torch(env: dict[str, str]) -> dict[str, str]:
    """``env`` where PyPI also serves the stand-in torch 2.13.0."""
    return env | {"PIP_FIND_LINKS": env["KIT_PYPI_TORCH"], "UV_FIND_LINKS": env["KIT_PYPI_TORCH"]}


def _run(line: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=folder, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(params=["pip", "uv"])
def route(request) -> str:
    if request.param == "uv" and shutil.which("uv") is None:
        pytest.skip("uv is not installed (pip install uv; the dev extra has it)")
    return request.param


def _linux_line(route: str, tmp_path: Path, index_url: str) -> tuple[Path, dict[str, str], subprocess.CompletedProcess]:
    """The route's Linux line, run in a fresh release folder with ``index_url`` in PyTorch's index's place."""
    folder, env = _student(tmp_path, _wheel(tmp_path / "pypi", "2.13.0"))
    if route == "uv":
        project = folder / "pyproject.toml"
        project.write_text(project.read_text().replace(CPU_INDEX, index_url))
    return folder, env, _run(_commands()[route].replace(CPU_INDEX, index_url), folder, env)


@pytest.mark.slow
def test_the_linux_line_asks_pytorchs_index_for_torch_alone(route, tmp_path):
    index = _Index(tmp_path / "cpu-index")
    try:
        folder, _, run = _linux_line(route, tmp_path, index.url)
    finally:
        index.shutdown()
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "2.13.0+cpu", run.stdout
    assert index.asked and all(path.startswith("/torch/") for path in index.asked), index.asked
    assert subprocess.run([str(folder / ".venv" / "bin" / "python"), "-c", "import filelock, einops"]).returncode == 0


@pytest.mark.slow
def test_where_pytorchs_index_is_unreachable_the_line_fails_fast_and_the_way_out_installs(route, tmp_path):
    started = time.monotonic()
    folder, env, failed = _linux_line(route, tmp_path, _closed_port())
    assert failed.returncode != 0 and time.monotonic() - started < 60, failed.stderr[-2000:]
    commands = _commands()
    way_out = f". .venv/bin/activate && {commands['pip way out']}" if route == "pip" else commands["uv way out"]
    run = _run(way_out, folder, _with_pypi_torch(env))  # the same shell: the venv the Linux line made, activated
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "2.13.0", run.stdout


def test_grader_release_prints_the_release_readmes_own_commands(tmp_path, capsys, monkeypatch):
    import grader.release
    from grader.release import main, setup_commands

    def build(out: Path, kit: Path | None = None) -> Path:  # the release's README as the build writes it
        out.mkdir()
        shutil.copyfile(README, out / "README.md")
        return out

    monkeypatch.setattr(grader.release, "build", build)
    assert main(str(tmp_path / "release")) == 0
    printed = capsys.readouterr().out
    commands = setup_commands(README.read_text(encoding="utf-8"))
    assert commands[0].startswith("uv sync") and any(c.startswith("python3 -m venv") for c in commands)
    assert all(f"    {command}\n" in printed for command in commands) and "pip install -e . && pytest" not in printed


@pytest.mark.slow
def test_the_bundles_setup_stops_after_one_retry_where_the_torch_index_is_unreachable(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(KIT / "grader" / "classroom" / "gradescope" / "setup.sh", source / "setup.sh")
    (source / "config.sh").write_text(f': "${{KIT_TORCH=torch==2.13.0}}"\n: "${{KIT_TORCH_INDEX={_closed_port()}}}"\n')
    (tmp_path / "no-wheels").mkdir()
    started = time.monotonic()
    run = subprocess.run(["bash", str(source / "setup.sh")], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "KIT_VENV": str(tmp_path / "v"), "PIP_INDEX_URL": _local_pypi(),
                              "PIP_FIND_LINKS": str(tmp_path / "no-wheels")})  # PyPI, standing in
    assert run.returncode == 1 and time.monotonic() - started < 180, run.stderr[-2000:]
    assert "set KIT_TORCH_INDEX= (empty) for PyPI's build" in run.stderr
    assert run.stderr.count("Retrying") <= 1, run.stderr  # one retry, not pip's default of five per address


def test_the_kits_test_command_is_the_one_ci_runs():
    readme = (KIT / "README.md").read_text(encoding="utf-8")
    command = next(line.strip() for line in readme.splitlines() if "python -m pytest tests grader/tests" in line)
    assert command.split(" && ")[-1] + " -p no:cacheprovider" in (KIT / ".ci" / "run").read_text()
