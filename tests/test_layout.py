"""The package shows the pipeline: every module sits in a stage's subpackage, imports only
what its stage's `MAY_IMPORT` allows, the stages import one way (config at the bottom,
checks at the top, no cycle), and the tests mirror that layout."""
import ast
import importlib
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "servelab"
STAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
SHARED = {"atomic", "machine", "raw_result", "stats"}   # root modules every stage may use
ENTRY = {"cli", "__main__"}   # the `servelab` command: may import every stage, imported by none


def servelab_imports(path: Path) -> set[str]:
    """Dotted servelab modules or packages a file imports, lazily inside functions too."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "servelab":
            found.update(f"{node.module}.{a.name}" for a in node.names)  # a module or a name in one
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "servelab")
    return found


def base_modules() -> set[str]:
    """Modules that import nothing from servelab, so that any stage may use them."""
    return {f"servelab.{stage}.{m}" for stage in STAGES
            for m in getattr(importlib.import_module(f"servelab.{stage}"), "BASE_MODULES", ())}


def test_the_root_holds_only_the_map_and_the_shared_helpers():
    loose = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert loose == SHARED | ENTRY
    assert set(STAGES) == {"config", "fetch", "engines", "serve", "search", "analysis", "export", "run", "checks"}
    for stage in STAGES:
        package = importlib.import_module(f"servelab.{stage}")
        assert package.__doc__ and len(package.__doc__.strip().splitlines()) >= 2, stage
        assert set(package.MAY_IMPORT) <= set(STAGES) - {stage}, stage


def test_the_layers_import_one_way():
    """config at the bottom imports no other stage; checks at the top is imported by none
    (only the entry point and the workflow use it); and no chain of MAY_IMPORT leads back
    to the stage it started from."""
    may = {stage: set(importlib.import_module(f"servelab.{stage}").MAY_IMPORT) for stage in STAGES}
    assert may["config"] == set(), "config is what every stage stands on: it may import none"
    assert not [stage for stage in STAGES if "checks" in may[stage]], "only the entry point and the workflow import checks"
    for start in STAGES:   # every stage reachable from `start` through MAY_IMPORT, by walking the graph
        path, seen, todo = {start: [start]}, set(), [start]
        while todo:
            stage = todo.pop()
            for below in sorted(may[stage]):
                assert below != start, f"stages import in a cycle: {' -> '.join(path[stage] + [start])}"
                if below not in seen:
                    seen.add(below)
                    path[below] = path[stage] + [below]
                    todo.append(below)


def test_no_stage_imports_the_command_line():
    importers = [str(path.relative_to(PACKAGE)) for path in PACKAGE.glob("*/**/*.py")
                 if any(t.split(".")[1] in ENTRY for t in servelab_imports(path) if len(t.split(".")) > 1)]
    assert not importers


def test_every_module_imports_only_what_its_stage_may():
    bases = base_modules()
    violations = []
    for path in sorted(PACKAGE.glob("*/**/*.py")):   # a stage's modules, in its sub-folders too (engines/vllm/)
        parts_of_path = path.relative_to(PACKAGE).with_suffix("").parts
        stage, module = parts_of_path[0], "servelab." + ".".join(parts_of_path)
        allowed = set(importlib.import_module(f"servelab.{stage}").MAY_IMPORT) | {stage}
        for target in servelab_imports(path):
            parts = target.split(".")
            if parts[1] in SHARED or target in bases or any(target.startswith(b + ".") for b in bases):
                continue
            if module in bases:
                violations.append(f"{module} is a base module but imports {target}")
            elif parts[1] not in allowed:
                violations.append(f"{module} imports {target}: {stage} may import only {sorted(allowed)}")
    assert not violations, "\n".join(violations)


def test_a_rule_script_imports_from_its_own_stage():
    # which stage each rule file is (workflow/rules/*.smk) and which scripts it runs
    # a search's rules are in one file: its rounds, its frontier measured again (a session) and its figures
    rule_stage = {"fetch.smk": {"fetch"}, "serve.smk": {"serve", "checks"}, "search.smk": {"search", "serve", "checks", "analysis"},
                  "analysis.smk": {"analysis"}, "export.smk": {"export"}}
    scripts = {}
    for smk, stages in rule_stage.items():
        text = (REPO / "workflow/rules" / smk).read_text()
        for line in text.splitlines():
            if "../scripts/" in line:
                scripts[line.split("../scripts/")[1].split('"')[0]] = stages | {"run"}
    assert scripts, "no rule scripts found"
    for script, stages in scripts.items():
        for target in servelab_imports(REPO / "workflow/scripts" / script):
            assert target.split(".")[1] in stages | SHARED, f"{script} imports {target}, outside {sorted(stages)}"


def test_tests_mirror_the_package():
    tests = REPO / "tests"
    for stage in STAGES:
        assert list((tests / stage).glob("test_*.py")), f"tests/{stage}/ holds no tests"
    # beside this file, only the tests of the root's entry modules (test_cli.py)
    stray = [p.name for p in tests.glob("test_*.py")
             if p.name != Path(__file__).name and p.stem.removeprefix("test_") not in ENTRY]
    assert not stray, f"tests outside a stage's folder: {stray}"


def test_the_readme_layout_names_every_rule_file():
    layout = (REPO / "README.md").read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    missing = [p.name for p in sorted((REPO / "workflow/rules").glob("*.smk")) if p.name not in layout]
    assert not missing, f"README's layout does not name {missing}"


def test_each_engine_is_a_folder_behind_the_registrys_face():
    """An engine's own modules are in its folder (docs/adding-an-engine.md), its face is
    that folder's `engine` module, and the top of engines/ holds only what engines share."""
    from servelab.engines.registry import ENGINES

    engines = PACKAGE / "engines"
    folders = {type(e).__module__.split(".")[2] for e in ENGINES.values()}
    assert folders == {"vllm", "sglang", "hf"}
    for name, engine in ENGINES.items():
        assert type(engine).__module__.endswith(".engine"), name
    shared = {p.stem for p in engines.glob("*.py")} - {"__init__"}
    assert shared == {"registry", "face", "commands", "environment", "offline_plan", "server_log", "prestart",
                      "zygote", "zygote_process"}
    assert {p.name for p in engines.iterdir() if p.is_dir() and p.name != "__pycache__"} == folders | {"clients"}


def test_modules_functions_and_the_readme_stay_within_their_sizes():
    """Issue 74's bounds, kept: no module over 350 lines, no function over 80, the README at
    most 150 lines (a module that grows past them is split by what its parts do)."""
    import ast

    long_modules, long_functions = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > 350:
            long_modules.append(f"{path.relative_to(REPO)}: {len(text.splitlines())}")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 80:
                long_functions.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert not long_modules and not long_functions, (long_modules, long_functions)
    assert len((REPO / "README.md").read_text().splitlines()) <= 150
