"""The speed-of-light floor under every scored time (`verdict.physics`: `impossible_time`)."""

from __future__ import annotations

from kernelbench_v3.evaluate.supervisor.verdict import physics


def test_physics_is_a_floor_under_every_scored_time():
    assert "not positive" in physics.impossible(0.0, "level1/26_GELU_", "NVIDIA H200", "fp32", True)
    assert "not positive" in physics.impossible(-1.27, "level1/26_GELU_", "NVIDIA H200", "fp32", True)
    assert "not positive" in physics.impossible(float("nan"), "level1/26_GELU_", "cpu", "fp32", False)
    light = physics.speed_of_light_ms("level1/26_GELU_", "NVIDIA H200", "fp32")
    assert light and light > 0
    assert "speed of light" in physics.impossible(light * 0.5, "level1/26_GELU_", "NVIDIA H200", "fp32", True)
    assert physics.impossible(light * 1.5, "level1/26_GELU_", "NVIDIA H200", "fp32", True) == ""
    # Other sizes or an unknown device: only the sign is checked.
    assert physics.impossible(light * 0.5, "level1/26_GELU_", "NVIDIA H200", "fp32", False) == ""
    assert physics.impossible(1e-9, "level1/26_GELU_", "some cpu", "fp32", True) == ""
    # The H200's own roofline, not the H100's: its memory is faster.
    h100 = physics.speed_of_light_ms("level1/26_GELU_", "h100", "fp32")
    assert h100 > light
