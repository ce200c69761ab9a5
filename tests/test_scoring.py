"""evaluate.scoring: the speed-of-light figure a record carries."""

from kernelbench_v3.catalog.problem import get_problem
from kernelbench_v3.evaluate.scoring import problem_speed_of_light_ms
from kernelbench_v3.hardware.gpus import get_gpu
from kernelbench_v3.hardware.roofline import DEFAULT_ROOFLINE, speed_of_light_ms


def test_a_problem_speed_of_light_is_the_rooflines_at_default_sizes():
    problem = get_problem("level1/23_Softmax")
    flops, nbytes = DEFAULT_ROOFLINE[problem.problem_id][:2]
    want = speed_of_light_ms(flops, nbytes, get_gpu("h100"), "fp32")
    assert problem_speed_of_light_ms("level1/23_Softmax", "h100", "fp32") == want > 0


def test_an_unknown_problem_or_gpu_has_no_speed_of_light():
    assert problem_speed_of_light_ms("level1/no_such_problem", "h100", "fp32") is None
    assert problem_speed_of_light_ms("level1/23_Softmax", "a100x", "fp32") is None
