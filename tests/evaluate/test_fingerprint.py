"""The GPU's name and driver (`fingerprint`): nvidia-smi asked once per process and GPU pinning,
however many times an evaluation needs them."""

from __future__ import annotations

import types

import pytest

from kernelbench_v3.evaluate import fingerprint


@pytest.fixture
def fake_smi(monkeypatch):
    asked = []

    def run(cmd, **kwargs):
        asked.append(cmd[1])
        return types.SimpleNamespace(returncode=0, stdout="NVIDIA H200\nNVIDIA H200\n")

    fingerprint._nvidia_smi_once.cache_clear()
    monkeypatch.setattr(fingerprint.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(fingerprint.subprocess, "run", run)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield asked
    fingerprint._nvidia_smi_once.cache_clear()


def test_the_gpu_name_is_asked_once_per_process_and_pinning(fake_smi, monkeypatch):
    assert fingerprint.device_name("cuda") == "NVIDIA H200"
    assert fingerprint.device_name("cuda") == "NVIDIA H200"
    assert fake_smi == ["--query-gpu=name"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # another GPU pinned: asked again
    fingerprint.device_name("cuda")
    assert fake_smi == ["--query-gpu=name"] * 2
