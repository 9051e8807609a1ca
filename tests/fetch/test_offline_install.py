"""The air-gapped GPU node's two steps, for real on a small lock: envs/offline-gpu/fetch.sh
cuts a lock's wheels into checked pieces, install.sh joins, checks and installs them into a
target of their own, whose console scripts then run with no PYTHONPATH (how a second client,
AIPerf, runs beside vLLM without its pins: SERVELAB_AIPERF=TARGET/bin/aiperf)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def a_wheel_with_a_console_script(tmp: Path) -> Path:
    pkg = tmp / "pkg"
    (pkg / "hello_offline").mkdir(parents=True)
    (pkg / "hello_offline" / "__init__.py").write_text("def main():\n    print('hello from', __file__)\n")
    (pkg / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "hello-offline"\nversion = "1.0"\n'
        '[project.scripts]\nhello-offline = "hello_offline:main"\n')
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp / "built"), str(pkg)], check=True)
    return next((tmp / "built").glob("*.whl"))


def test_a_lock_fetched_in_pieces_installs_into_its_own_target_and_its_scripts_run(tmp_path):
    wheel = a_wheel_with_a_console_script(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    lock = tmp_path / "lock.txt"
    lock.write_text(f"{wheel}\n")   # pip downloads a wheel file as it would a pin, offline
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "PIECE_SIZE": "1k",
           "WORK": str(tmp_path / "unpack")}
    env.pop("PYTHONPATH", None)
    fetched = subprocess.run(["bash", str(REPO / "envs/offline-gpu/fetch.sh"), "client", str(lock)], cwd=project,
                             env=env, capture_output=True, text=True, check=True)
    pieces = sorted((project / ".gpu/client").glob("p*/part.*"))
    assert len(pieces) > 1 and (project / ".gpu/client/payload.sha256").is_file(), fetched.stdout
    target = tmp_path / "client-site"
    for _ in range(2):   # idempotent: the second install changes nothing
        out = subprocess.run(["bash", str(REPO / "envs/offline-gpu/install.sh"), "client", str(target),
                              str(project / ".gpu/client")], env=env, capture_output=True, text=True, check=True)
        assert "client installed in" in out.stdout
    script = target / "bin" / "hello-offline"
    assert script.read_text().count("sys.path.insert") == 1
    ran = subprocess.run([str(script)], env=env, capture_output=True, text=True, check=True, cwd=tmp_path)
    assert str(target / "hello_offline") in ran.stdout
    # a damaged piece is refused before anything is installed
    pieces[0].write_bytes(b"damaged")
    elsewhere = tmp_path / "elsewhere"
    bad = subprocess.run(["bash", str(REPO / "envs/offline-gpu/install.sh"), "client", str(elsewhere),
                          str(project / ".gpu/client")], env={**env, "WORK": str(tmp_path / "unpack2")},
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "missing or damaged" in bad.stdout and not (elsewhere / "bin").exists()
