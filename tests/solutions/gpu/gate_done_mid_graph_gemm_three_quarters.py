"""Attack (GPU): as gate_done_mid_graph_gemm_half.py, with DONE written three quarters of the
way through the GEMM (after three of its four launches).

Problem: level1/1_Square_matrix_multiplication_
Class: T2
Expect: timed_outputs (the output copied at DONE lacks its last quarter), or timing_gap
(gap_work); never scored at the forged time
"""
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("kbv3_done_mid_half", Path(__file__).with_name("gate_done_mid_graph_gemm_half.py"))
_half = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_half)


class Model(_half.Model):
    DONE_AFTER = 3
