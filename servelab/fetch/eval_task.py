"""A local lm-eval task in GSM8K's format, for machines with no hub access.

The questions are arithmetic word problems generated from a seed (the answer
line is GSM8K's `#### N`); the task YAML `include:`s lm-eval's own installed
gsm8k.yaml, so prompt, stop strings, filters and metrics are lm-eval's, and only
the data source differs. It measures nothing about GSM8K itself: it lets the
week-12 accuracy pipeline run end to end on the CPU default.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import yaml

from servelab.atomic import write_text

ITEMS = ["apples", "books", "marbles", "stamps", "pencils", "tickets", "cookies", "shells"]
NAMES = ["Ada", "Bo", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana"]


def problem(rng: random.Random) -> dict:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    have, more, gave = rng.randint(10, 90), rng.randint(2, 40), rng.randint(1, 9)
    total = have + more - gave
    question = (f"{name} has {have} {item}. {name} buys {more} more and then gives {gave} to a friend. "
                f"How many {item} does {name} have now?")
    answer = (f"{name} has {have} + {more} = <<{have}+{more}={have + more}>>{have + more} {item} after buying.\n"
              f"After giving {gave} away, {name} has {have + more} - {gave} = "
              f"<<{have + more}-{gave}={total}>>{total} {item}.\n#### {total}")
    return {"question": question, "answer": answer}


def base_task_yaml(base: str) -> Path:
    """The installed lm-eval YAML of task `base` (e.g. gsm8k)."""
    import lm_eval

    path = Path(lm_eval.__file__).parent / "tasks" / base / f"{base}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"lm-eval has no task file {path} to base a local task on")
    return path


def write_task(out_dir: str | Path, name: str, base: str, questions: int, *, fewshot_pool: int,
               seed: int) -> Path:
    """Write {name}.yaml, test.jsonl and train.jsonl (the few-shot pool) into out_dir."""
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    splits = {"test": [problem(rng) for _ in range(questions)],
              "train": [problem(rng) for _ in range(fewshot_pool)]}
    for split, rows in splits.items():
        write_text(out / f"{split}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    task = {
        "include": str(base_task_yaml(base)),
        "task": name,
        "dataset_path": "json",
        "dataset_name": None,
        # absolute: lm-eval resolves data files against its working directory
        "dataset_kwargs": {"data_files": {s: str(out / f"{s}.jsonl") for s in splits}},
        "training_split": "train",
        "fewshot_split": "train",
        "test_split": "test",
    }
    path = out / f"{name}.yaml"
    write_text(path, yaml.safe_dump(task, sort_keys=False))
    return path
