"""Workloads: generated ShareGPT files, and downloads over real HTTP with checksums."""
import functools
import hashlib
import http.server
import json
import threading

import pytest

from servelab.fetch import datasets


def test_generated_sharegpt_is_deterministic_and_well_formed(tmp_path):
    a = datasets.generate_sharegpt(tmp_path / "a.json", 50, 0, (60, 120), reply_words=(20, 60))
    b = datasets.generate_sharegpt(tmp_path / "b.json", 50, 0, (60, 120), reply_words=(20, 60))
    assert a.read_bytes() == b.read_bytes()
    data = json.loads(a.read_text())
    assert len(data) == 50
    for item in data:
        human, gpt = item["conversations"]
        assert human["from"] == "human" and gpt["from"] == "gpt"
        assert 60 <= len(human["value"].split()) <= 120 and 20 <= len(gpt["value"].split()) <= 60


@pytest.fixture
def http_root(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    (root / "sg.json").write_text(json.dumps([{"id": "1", "conversations": []}]))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_download_verifies_a_pinned_checksum(tmp_path, http_root):
    root, base = http_root
    good = hashlib.sha256((root / "sg.json").read_bytes()).hexdigest()
    out = datasets.download(f"{base}/sg.json", tmp_path / "d/sg.json", good, progress=lambda m: None)
    assert out.read_bytes() == (root / "sg.json").read_bytes()
    with pytest.raises(ValueError, match="checksum mismatch"):
        datasets.download(f"{base}/sg.json", tmp_path / "d/bad.json", "0" * 64, progress=lambda m: None)
    assert not (tmp_path / "d/bad.json").exists()
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["sg.json"]  # nothing half-written


def test_unpinned_download_records_then_enforces_its_checksum(tmp_path, http_root):
    root, base = http_root
    out = tmp_path / "sg.json"
    datasets.download(f"{base}/sg.json", out, None, progress=lambda m: None)
    recorded = (tmp_path / "sg.json.sha256").read_text().split()[0]
    assert recorded == hashlib.sha256(out.read_bytes()).hexdigest()
    (root / "sg.json").write_text("[]")  # the upstream file changed
    out.unlink()
    with pytest.raises(ValueError, match="checksum mismatch"):
        datasets.download(f"{base}/sg.json", out, None, progress=lambda m: None)
