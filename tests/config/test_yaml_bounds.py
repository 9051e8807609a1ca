"""Config files read bounded (servelab.config.yaml_bounds): an alias bomb, a named pipe and a
YAML list among the overlays are refused by name, at once, by every command that reads them."""
import os
import subprocess
import sys
import time

import pytest

from conftest import REPO
from servelab.config.yaml_bounds import read_config_file

BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(8))   # 10^9 values from under 1 KB


def test_an_alias_bomb_a_pipe_and_a_list_are_refused_naming_the_file(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    start = time.monotonic()
    with pytest.raises(ValueError, match=r"bomb.yaml expands past 100,000 values through its YAML aliases"):
        read_config_file(bomb)
    assert time.monotonic() - start < 5
    pipe = tmp_path / "pipe.yaml"
    os.mkfifo(pipe)   # a read would block forever: nobody writes it
    with pytest.raises(ValueError, match="pipe.yaml is not a regular file"):
        read_config_file(pipe)
    with pytest.raises(ValueError, match="is a directory, not a config file"):
        read_config_file(tmp_path)
    listed = tmp_path / "list.yaml"
    listed.write_text("- run\n- week01\n")
    with pytest.raises(ValueError, match="list.yaml holds a YAML list, not a mapping of config keys"):
        read_config_file(listed)
    anchors = tmp_path / "anchors.yaml"   # the shipped studies' own anchors still read
    anchors.write_text("x: &args {max_num_seqs: 8}\ny: {<<: *args, max_model_len: 512}\n")
    assert read_config_file(anchors)["y"] == {"max_num_seqs": 8, "max_model_len": 512}


@pytest.mark.parametrize("command", ["validate", "plan", "preflight"])
def test_each_command_refuses_the_bomb_at_once(tmp_path, command):
    (tmp_path / "bomb.yaml").write_text(BOMB)
    proc = subprocess.run([sys.executable, "-m", "servelab", command, "config/config.yaml", str(tmp_path / "bomb.yaml")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "bomb.yaml expands past 100,000 values" in proc.stdout + proc.stderr
