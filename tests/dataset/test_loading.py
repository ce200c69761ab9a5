"""`load_problems` on a user's mistakes (issue 41, item 4): a path-like source that does not
exist fails at once naming the path (never taken for a Hub repo id and retried), an offline or
unreachable Hub fails at once with the way out (no client retries), and the split takes any
spelling, as every `--split` does. Nothing here touches the network: the probe and `datasets`
are replaced where a test must see whether they were asked."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kernelbench_v3 import hub_reach, load_problems
from kernelbench_v3.dataset import hub, loading
from tests.dataset.test_hub import TINY, write_problems


@pytest.fixture
def no_datasets(monkeypatch):
    """`datasets.load_dataset` that fails the test if it is called: the mistake was not seen first."""
    import datasets

    def refuse(*args, **kwargs):
        raise AssertionError(f"datasets.load_dataset{args} was called")

    monkeypatch.setattr(datasets, "load_dataset", refuse)


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the Hub's host was probed")

    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.parametrize("source", ["out/nohub", "./nohub", "out/hub/extra", "no such folder"])
def test_a_path_like_source_that_does_not_exist_is_named_at_once(
    source, tmp_path, monkeypatch, no_datasets, no_network
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()  # `out/nohub` beside the demo's `out/`: a path, not a repo id
    with pytest.raises(FileNotFoundError, match=f"dataset folder {Path(source)} does not exist; build one"):
        load_problems("h100", source=source)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_problems("h100", source=tmp_path / "nohub")  # a Path is always a folder


def test_repo_ids_and_paths_are_told_apart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert not loading.is_local_source("Infatoshi/kernelbench-v3-problems")
    assert not loading.is_local_source("out/nohub")  # no `out/` here: it can only be a repo id
    (tmp_path / "out").mkdir()
    assert loading.is_local_source("out/nohub") and loading.is_local_source("a/b/c")
    assert loading.is_local_source("~/x") and loading.is_local_source("nohub")


@pytest.mark.parametrize("switch", ["HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"])
def test_offline_the_hub_is_never_probed_and_a_cache_miss_says_what_to_do(switch, monkeypatch, no_network, tmp_path):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv(switch, "1")
    import datasets

    asked = []

    def offline_miss(path, **kwargs):
        asked.append(path)
        raise ConnectionError(f"Couldn't reach '{path}' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr(datasets, "load_dataset", offline_miss)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(hub.HubUnavailableError) as error:
        load_problems("h100")
    assert asked == [loading.DEFAULT_REPO_ID]  # one try of the local cache, no retries
    message = str(error.value)
    assert f"{switch} is set" in message and "kbv3 build out/hub" in message and "source='out/hub'" in message


def test_an_unreachable_hub_fails_at_the_probe_without_asking_datasets(monkeypatch, no_datasets, tmp_path):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    probed = []

    def unreachable(address, timeout=None):
        probed.append((address, timeout))
        raise OSError(101, "Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", unreachable)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(hub.HubUnavailableError, match="huggingface.co cannot be reached .Network is unreachable."):
        load_problems("h100", source="Infatoshi/kernelbench-v3-problems")
    assert probed == [(("huggingface.co", 443), hub_reach.HUB_PROBE_S)]


def test_the_split_takes_any_spelling(tmp_path):
    built = hub.build(tmp_path / "built", write_problems(tmp_path / "problems", TINY), with_prompts=False).out_dir
    want = list(load_problems("h100", built)["problem_id"])
    assert list(load_problems("H100", built)["problem_id"]) == want
    assert list(load_problems("RTX 3090", str(built))["problem_id"]) == list(
        load_problems("rtx3090", built)["problem_id"]
    )
    with pytest.raises(ValueError, match="unknown split 'a100'; choose one of rtx3090, h100, b200"):
        load_problems("a100", built)
