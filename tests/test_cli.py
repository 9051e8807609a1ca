"""`servelab`: one command with a --help for each user command; `validate` refuses what the
run would refuse, naming the key, before any GPU time."""
import subprocess
import sys

from conftest import REPO

from servelab import cli


def servelab(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "servelab", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_help_lists_every_command_and_each_has_its_own_help():
    top = servelab("--help")
    assert top.returncode == 0
    for name in cli.COMMANDS:
        assert f"    {name}" in top.stdout
    for name in ("validate", "preflight", "archive", "bench"):
        own = servelab(name, "--help")
        assert own.returncode == 0, own.stderr
        assert own.stdout.startswith(f"usage: servelab {name}"), own.stdout[:200]
    assert "week01_overhead" in servelab("bench", "--help").stdout
    wrong = servelab("nope")
    assert wrong.returncode == 2 and "invalid choice: 'nope'" in wrong.stderr


def test_validate_refuses_impossible_values_by_key_path(tmp_path):
    for knob in ("max_num_seqs", "tensor_parallel_size"):
        overlay = tmp_path / f"{knob}.yaml"
        overlay.write_text(f"experiments:\n  week01:\n    server:\n      args: {{{knob}: 0}}\n")
        run = servelab("validate", "config/config.yaml", str(overlay))
        assert run.returncode == 1, run.stdout + run.stderr
        assert f"experiments.week01.server.args.{knob}: 0 is not allowed: give a whole number >= 1" in run.stderr
    # a cross-check the schema cannot express: an experiment `run` does not know
    overlay = tmp_path / "run.yaml"
    overlay.write_text("run: [week99]\n")
    run = servelab("validate", "config/config.yaml", str(overlay))
    assert run.returncode == 1 and "run: unknown experiment 'week99'" in run.stderr
    missing = servelab("validate", str(tmp_path / "absent.yaml"))
    assert missing.returncode == 2 and "No such file" in missing.stderr


def test_the_console_script_is_declared():
    text = (REPO / "pyproject.toml").read_text()
    assert 'servelab = "servelab.cli:main"' in text
