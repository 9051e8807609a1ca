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
    listed = servelab("bench", "--help").stdout
    assert "week01_overhead              pipeline overhead of the embedded week 1 sweep" in listed
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


def test_every_option_of_the_user_commands_says_what_it_is():
    import re

    for args in (("archive", "verify"), ("export",), ("import",), ("plan",), ("preflight",)):
        text = servelab(*args, "--help").stdout
        assert text.startswith(f"usage: servelab {' '.join(args)}"), text[:200]
        assert len(text.split("\n\n")) >= 3, text   # usage, a description, the arguments
        # each argument line (two spaces, then its name) is followed by its words on that line or the next
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if re.match(r"^  \S", line) and not line.strip().startswith("-h,"):
                after = lines[i + 1] if i + 1 < len(lines) else ""
                own = line.strip().split("  ", 1)[1:] or [after if re.match(r"^ {8,}[^ -]", after) else ""]
                assert own[0].strip(), f"servelab {' '.join(args)}: {line.strip()!r} has no help"
    for args in (("plan",), ("preflight",)):
        assert "(default: config/config.yaml)" in " ".join(servelab(*args, "--help").stdout.split())


def test_validate_checks_the_commands_of_what_run_names_and_says_so(tmp_path):
    """The default's commands only (`run`), unless --all; and no import chatter of the engines
    around what it says."""
    overlay = tmp_path / "one.yaml"
    overlay.write_text("run: [week01]\n")
    run = servelab("validate", "config/config.yaml", "config/local.yaml", str(overlay))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith("0 problem(s) in 1 experiment(s) (those `run` names; --all for every experiment)")
    assert "Triton" not in run.stderr and "INFO" not in run.stderr, run.stderr
