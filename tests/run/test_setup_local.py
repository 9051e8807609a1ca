"""envs/setup-local.sh, the README's first step: on a disk too full for a fresh .venv it
stops before pip with a sentence naming what it needs and what is free, instead of pip's
"OSError: [Errno 28] No space left on device" halfway through the install (a CI run of
stop 54 ended so, after 97 s)."""
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _copy_of_setup(tmp_path):
    (tmp_path / "envs").mkdir()
    for name in ("envs/setup-local.sh", "envs/local-cpu.txt", "envs/aiperf.txt", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_a_disk_too_full_for_a_fresh_venv_is_named_before_pip_runs(tmp_path):
    repo = _copy_of_setup(tmp_path)
    proc = subprocess.run(["bash", "envs/setup-local.sh"], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "SERVELAB_SETUP_NEED_GIB": "1000000"}, timeout=60)
    assert proc.returncode == 1
    assert "needs about 1000000 GiB free for .venv" in proc.stderr
    assert "GiB free on /" in proc.stderr
    assert not (repo / ".venv").exists()          # nothing half-made


def test_an_installed_venv_is_not_held_to_the_space_a_fresh_one_needs(tmp_path):
    """A rerun with .venv already installed and stamped touches nothing, full disk or not."""
    repo = _copy_of_setup(tmp_path)
    venv_bin = repo / ".venv/bin"
    venv_bin.mkdir(parents=True)
    os.symlink(ROOT / ".venv/bin/python", venv_bin / "python")
    stamp = subprocess.run("cat envs/local-cpu.txt pyproject.toml envs/setup-local.sh | sha256sum",
                           shell=True, cwd=repo, capture_output=True, text=True).stdout.split()[0]
    (repo / ".venv/.servelab-installed").write_text(stamp + "\n")
    # and AIPerf's own install target, stamped as installed too
    (repo / ".venv-aiperf").mkdir()
    aiperf = subprocess.run("sha256sum envs/aiperf.txt", shell=True, cwd=repo, capture_output=True,
                            text=True).stdout.split()[0]
    (repo / ".venv-aiperf/.servelab-installed").write_text(aiperf + "\n")
    proc = subprocess.run(["bash", "envs/setup-local.sh"], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "SERVELAB_SETUP_NEED_GIB": "1000000"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "needs about" not in proc.stderr
    assert proc.stdout.startswith("servelab: .venv ready")   # (the stand-in venv has no packages to name)
