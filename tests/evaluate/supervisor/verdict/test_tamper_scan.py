"""The static tamper scan: each rule fires on its idiom (also behind an alias) and stays silent on
honest kernel code, including every example solution in the repository."""

import textwrap

import pytest

from kernelbench_v3.evaluate.supervisor.verdict.tamper_scan import WHY, Finding, TamperScan, scan
from tests.paths import CHEATS, EXAMPLES, PROBLEMS, SOLUTIONS

HONEST_FILES = sorted(EXAMPLES.glob("**/*.py")) + [SOLUTIONS / "triton_add_one.py"]


def rules(source: str) -> set[str]:
    return {f.rule for f in scan(textwrap.dedent(source)).findings}


# (rule, source): every rule has a plain case and at least one alias or indirect case.
POSITIVE = [
    ("frame_introspection", "import sys\nf = sys._getframe(1)"),
    ("frame_introspection", "import sys as s\nf = s._getframe(1)"),
    ("frame_introspection", "from inspect import currentframe as cf\nx = cf().f_back.f_locals"),
    ("frame_introspection", "import inspect\nfor fr in inspect.stack(): pass"),
    ("frame_introspection", "try:\n    1/0\nexcept Exception as e:\n    g = e.__traceback__.tb_frame.f_globals"),
    ("frame_introspection", "import sys\nprint(getattr(sys, '_getframe')(0))"),
    ("process_control", "__import__('subprocess').run(['id'])"),
    ("frame_introspection", "import sys\nsys.settrace(lambda *a: None)"),
    ("frame_introspection", "import threading as th\nth.settrace(print)"),
    ("frame_introspection", "import sys\nsys.monitoring.use_tool_id(1, 'x')"),
    ("frame_introspection", "import traceback\ns = traceback.walk_stack(None)"),
    ("frame_introspection", "import sys\ng = getattr(sys, '_getframe', None)"),
    ("frame_introspection", "import sys\nsys.addaudithook(print)"),
    ("gc_introspection", "import gc\nobjs = gc.get_objects()"),
    ("gc_introspection", "from gc import get_referrers as refs\nrefs(1)"),
    ("evaluator_access", "import kernelbench_v3.evaluate.supervisor.reference.child"),
    ("evaluator_access", "from kernelbench_v3.evaluate import timing as t"),
    ("evaluator_access", "import importlib\nm = importlib.import_module('kernelbench_v3.evaluate.timing')"),
    ("evaluator_access", "m = __import__('kernelbench_v3')"),
    ("evaluator_access", "import sys\nm = sys.modules['kernelbench_v3.evaluate.timing']"),
    ("evaluator_access", "import sys\nm = sys.modules.get('kernelbench_v3.evaluate.timing')"),
    ("evaluator_access", "import sys\nsys.modules['torch'] = None"),
    ("evaluator_access", "from sys import modules\nmodules.pop('triton')"),
    ("evaluator_access", "import sys\nfor m in list(sys.modules.values()): pass"),
    ("evaluator_access", "import sys\nmain = sys.modules['__main__']"),
    ("evaluator_access", "from . import helpers"),
    ("monkeypatching", "import torch\ntorch.allclose = lambda *a, **k: True"),
    ("monkeypatching", "import time as t\nt.perf_counter = lambda: 0.0"),
    ("monkeypatching", "import torch\nE = torch.cuda.Event\nE.elapsed_time = lambda self, other: 1e-6"),
    ("monkeypatching", "from torch import Tensor\nTensor.__sub__ = lambda a, b: a"),
    ("monkeypatching", "import torch.nn as nn\nnn.Module.__call__ = lambda self, *a: None"),
    ("monkeypatching", "import torch\nsetattr(torch, 'allclose', lambda *a: True)"),
    ("monkeypatching", "import json\ndelattr(json, 'dumps')"),
    ("monkeypatching", "import torch\ntorch.__dict__['allclose'] = max"),
    ("monkeypatching", "import torch\nvars(torch)['allclose'] = max"),
    ("monkeypatching", "import torch\nvars(torch.testing).update(assert_close=print)"),
    ("monkeypatching", "__builtins__.print = None"),
    ("monkeypatching", "import builtins\nbuiltins.open = None"),
    ("monkeypatching", "import triton\ntriton.testing.do_bench = lambda *a, **k: 0.001"),
    ("monkeypatching", "import torch\ndel torch.testing.assert_close"),
    ("monkeypatching", "import sys\nsys.modules['time'].perf_counter = lambda: 0.0"),
    ("monkeypatching", "import importlib\ntm = importlib.import_module('time')\ntm.perf_counter = print"),
    ("monkeypatching", "import torch\ntype.__setattr__(torch.Tensor, 'add', print)"),
    ("monkeypatching", "import torch\ncuda = getattr(torch, 'cuda')\ncuda.synchronize = print"),
    ("monkeypatching", "import torch\ntorch.cuda.synchronize += 0"),
    ("global_flags", "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True"),
    ("global_flags", "import torch.backends.cudnn as cudnn\ncudnn.allow_tf32 = True"),
    ("global_flags", "import torch\ntorch.set_float32_matmul_precision('high')"),
    ("process_control", "import os\nos._exit(0)"),
    ("process_control", "import sys\nsys.exit(0)"),
    ("process_control", "from os import _exit as quit_now\nquit_now(0)"),
    ("process_control", "import posix\nposix._exit(0)"),
    ("process_control", "from os import *\n_exit(0)"),
    ("process_control", "import os\nos.execv('/bin/sh', ['sh'])"),
    ("process_control", "import os\nos.kill(os.getppid(), 9)"),
    ("process_control", "import subprocess as sp\nsp.run(['ls'])"),
    ("process_control", "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)"),
    ("process_control", "import atexit\natexit.register(print)"),
    ("process_control", "import multiprocessing"),
    ("process_control", "o = __import__('os')\no.system('id')"),
    ("threads", "import threading\nthreading.Thread(target=print).start()"),
    ("threads", "from threading import Timer as T\nT(1.0, print).start()"),
    ("threads", "import _thread\n_thread.start_new_thread(print, ())"),
    ("threads", "from concurrent.futures import ThreadPoolExecutor"),
    ("threads", "import asyncio\nloop = asyncio.new_event_loop()"),
    ("network", "import socket\ns = socket.socket()"),
    ("network", "from urllib.request import urlopen as get\nget('http://x')"),
    ("network", "import http.client"),
    ("network", "import requests as r\nr.get('http://x')"),
    ("network", "import ssl"),
    ("dynamic_code", "exec('print(1)')"),
    ("dynamic_code", "import builtins\nbuiltins.__dict__['exec']('print(1)')"),
    ("dynamic_code", "run = eval\nrun('1')"),
    ("dynamic_code", "code = compile('1', 'x', 'eval')"),
    ("dynamic_code", "m = __import__('os')"),
    ("dynamic_code", "import importlib\nimportlib.reload(importlib)"),
    ("dynamic_code", "from importlib import util"),
    ("dynamic_code", "import marshal\nmarshal.loads(b'')"),
    ("dynamic_code", "import pickle as p\np.loads(b'')"),
    ("dynamic_code", "import base64\nexec(base64.b64decode('cHJpbnQoMSk='))"),
    ("dynamic_code", "import torch\nname = 'all' + 'close'\nf = getattr(torch, name)"),
    ("dynamic_code", "import torch\nname = 'allclose'\nsetattr(torch, name, max)"),
    ("dynamic_code", "globals()['Model'] = object"),
    ("dynamic_code", "globals().update(Model=object)"),
    ("dynamic_code", "b = __builtins__"),
    ("dynamic_code", "subs = object.__subclasses__()"),
    ("dynamic_code", "def f(): pass\ng = f.__globals__"),
    ("dynamic_code", "def f(): pass\nc = f.__code__.co_code"),
    ("dynamic_code", "import types\nf = types.FunctionType(compile('1', 'x', 'exec'), {})"),
    ("native_code", "import ctypes\nlibc = ctypes.CDLL(None)"),
    ("native_code", "from ctypes import CDLL as L\nL(None)"),
    ("native_code", "import cffi"),
    ("native_code", "import mmap"),
    ("native_code", "data = open('/proc/self/maps').read()"),
    ("native_code", "pid = 7\nmem = open(f'/proc/{pid}/mem', 'rb')"),
    ("native_code", 'import os\npath = "/proc/" + str(os.getppid()) + "/mem"'),
    ("native_code", 'src = """\n#include <dlfcn.h>\nvoid f() {\n  void* p = dlsym(RTLD_DEFAULT, "x");\n}\n"""'),
    ("native_code", 'src = """\nvoid f() { syscall(62, 1, 9); }\n"""'),
    ("native_code", 'cpp = "int g() { return kill(getppid(), 9); }"'),
    ("native_code", "import torch\ntorch.ops.load_library('evil.so')"),
    ("file_writes", "with open('result.json', 'w') as f:\n    f.write('{}')"),
    ("file_writes", "f = open('log.txt', mode='a')"),
    ("file_writes", "f = open('result.json', 'r+')"),
    ("file_writes", "import io\nf = io.open('x', 'wb')"),
    ("file_writes", "from pathlib import Path\nPath('result.json').write_text('{}')"),
    ("file_writes", "from pathlib import Path as P\np = P('a') / 'b'\np.replace('c')"),
    ("file_writes", "import os\nos.makedirs('build', exist_ok=True)"),
    ("file_writes", "from os import remove as rm\nrm('x')"),
    ("file_writes", "import shutil\nshutil.copy('a', 'b')"),
    ("file_writes", "import os\nfd = os.open('x', os.O_WRONLY | os.O_CREAT)"),
    ("file_writes", "import os\nos.dup2(3, 1)"),
    ("torch_compile", "import torch\nf = torch.compile(lambda x: x + 1)"),
    ("torch_compile", "from torch import compile as c\nf = c(print)"),
    ("torch_compile", "import torch._dynamo"),
    ("torch_compile", "from torch._inductor import config"),
    ("environment", "import os\nos.environ['CUDA_LAUNCH_BLOCKING'] = '1'"),
    ("environment", "from os import environ as env\nenv.update({'LD_PRELOAD': 'x.so'})"),
    ("environment", "import os\nos.putenv('X', '1')"),
    ("environment", "import os\ndel os.environ['PATH']"),
    ("environment", "import os\nos.environ.setdefault('TRITON_INTERPRET', '1')"),
]


@pytest.mark.parametrize("rule,source", POSITIVE, ids=[f"{r}-{i}" for i, (r, _) in enumerate(POSITIVE)])
def test_rule_fires(rule, source):
    assert rule in rules(source)


# Obfuscated reach (scan_reach): each idiom hidden from alias resolution is a finding of its own.
REACH = [
    ("hidden_reach", "import sys\nm = [sys][0]\nm._getframe(1)"),
    ("hidden_reach", "import sys\nd = {'s': sys}"),
    ("hidden_reach", "import os\nt = (os,)\nt[0].system('id')"),
    ("hidden_reach", "f = setattr\nf(object, 'x', 1)"),
    ("hidden_reach", "g = [getattr, delattr]"),
    ("hidden_reach", "b = __builtins__"),
    ("hidden_reach", "import builtins\nns = vars(builtins)"),
    ("hidden_reach", "import sys as s\nns = s.__dict__"),
    ("hidden_reach", "import sys\nalias = sys"),
    ("hidden_reach", "import sys\ndef g():\n    return sys"),
    ("hidden_reach", "import sys, os\n(sys or os).system('id')"),
    ("hidden_reach", "import torch\nm = [torch][0]\nm.allclose = max"),
    ("hidden_reach", "import torch\nc = [torch._C][0]"),
    ("hidden_reach", "import importlib\nm = importlib.import_module('sy' + 's')"),
    ("hidden_reach", "name = ''.join(['o', 's'])\nm = __import__(name)"),
    ("dynamic_attribute", "def f(x, name):\n    return getattr(x, name)"),
    ("dynamic_attribute", "class A:\n    pass\nv = getattr(A(), 'a' + 'b')"),
    ("dynamic_attribute", "class A:\n    pass\nv = getattr(A(), ''.join(['a', 'b']))"),
    ("dynamic_attribute", "def f(x, n):\n    setattr(x, n, 1)"),
    ("dynamic_attribute", "def f(x, n):\n    delattr(x, n)"),
    ("dynamic_attribute", "def f(x, n):\n    return hasattr(x, n)"),
    ("dynamic_attribute", "def f(x, n):\n    return getattr(x, f'__{n}__')"),
    ("dynamic_attribute", "n = 'a'\nn = n + 'b'\nclass A:\n    pass\nv = getattr(A(), n)"),
    ("dynamic_attribute", "import operator\ndef f(n):\n    return operator.attrgetter(n)"),
    ("dynamic_attribute", "def f(x, n):\n    return x.__getattribute__(n)"),
    ("dynamic_attribute", "def f(x, n):\n    return object.__getattribute__(x, n)"),
    ("evaluator_access", "import sys\nfor m in sys.modules:\n    pass"),
    ("evaluator_access", "import sys\nnames = list(sys.modules)"),
    ("evaluator_access", "import sys\nfor m in sys.modules.values():\n    pass"),
    ("evaluator_access", "import sys\nk = 'kernel' + 'bench_v3'\nm = sys.modules[k]"),
    ("evaluator_access", "import sys\nmods = getattr(sys, 'modules').values()"),
    ("evaluator_access", "import sys\nm = sys.__dict__['modules'].values()"),
    ("evaluator_access", "from sys import modules as M\nfor name in M:\n    pass"),
    ("evaluator_access", "import sys as s\nv = s.modules.items()"),
    ("torch_private", "import torch\nm = torch._C._get_dispatch_mode(None)"),
    ("torch_private", "import torch\nn = torch._C._len_torch_function_stack()"),
    ("torch_private", "from torch.utils._python_dispatch import _get_current_dispatch_mode"),
    ("torch_private", "import torch\nm = torch.utils._python_dispatch._get_current_dispatch_mode()"),
    ("torch_private", "import torch\ns = torch.overrides._get_current_function_mode_stack()"),
    (
        "torch_private",
        "from torch.utils._python_dispatch import TorchDispatchMode\nclass M(TorchDispatchMode):\n    pass",
    ),
    ("torch_private", "import torch\nclass M(torch.overrides.TorchFunctionMode):\n    pass"),
    ("torch_private", "import torch\nC = torch._C\nC._dispatch_tls_set_dispatch_key_excluded(0, True)"),
    ("torch_private", "from torch._C import _set_grad_enabled as g\ng(False)"),
    ("torch_private", "import torch\nwith torch._C.DisableTorchFunction():\n    pass"),
    (
        "torch_private",
        "import torch\nclass T(torch.Tensor):\n    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n        return True",
    ),
    ("monkeypatching", "import torch\ntype(torch.ones(1)).__eq__ = lambda a, b: True"),
    ("monkeypatching", "import torch\nt = torch.ones(1)\nt.__class__.add = print"),
    ("monkeypatching", "import torch\n[torch.Tensor][0].add = print"),
    ("monkeypatching", "import torch\nsetattr(type(torch.ones(1)), 'add', print)"),
    ("monkeypatching", "import torch\ncls = type(torch.ones(1))\ncls.add = print"),
    ("hidden_reach", "m = globals()['s' + 'ys']"),
    ("hidden_reach", "import sys\nm = globals()['sys']"),
]


@pytest.mark.parametrize("rule,source", REACH, ids=[f"{r}-{i}" for i, (r, _) in enumerate(REACH)])
def test_reach_rule_fires(rule, source):
    result = scan(source)
    assert rule in {f.rule for f in result.findings}, result.findings
    finding = next(f for f in result.findings if f.rule == rule)
    assert finding.why == WHY[rule] and finding.text == source.splitlines()[finding.line - 1].strip()


def test_every_rule_has_a_positive_case():
    assert {r for r, _ in POSITIVE + REACH} == set(WHY) - {"unparseable"}


def test_hidden_reach_names_the_hiding_line():
    source = "import sys\nimport torch\n\nholder = {'m': sys}\nholder['m'].settrace(print)\n"
    assert [(f.rule, f.line, f.text) for f in scan(source).findings] == [
        ("hidden_reach", 4, "holder = {'m': sys}"),
    ]


# Honest code close to each rule's idiom: none of it may trip anything.
HONEST = [
    "import inspect\nsig = inspect.signature(print)",  # frame_introspection
    "import traceback\nmsg = traceback.format_exc()",
    "import gc\ngc.collect()",  # gc_introspection
    "import sys\nif 'triton' in sys.modules:\n    pass\nm = sys.modules.get('triton')\nn = sys.modules['torch']",  # evaluator_access
    "if __name__ == '__main__':\n    pass",
    textwrap.dedent("""
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = 2.0
                self.lin = nn.Linear(2, 2)
                self.lin.weight.data = self.lin.weight.data * 2
                setattr(self, "extra", 1)
                for i in range(2):
                    setattr(self, f"p{i}", nn.Parameter(None))
        Model.extra = 3
    """),  # monkeypatching
    "import torch\ny = torch.empty(3)\ny.requires_grad = True",
    "import torch\ntf32 = torch.backends.cuda.matmul.allow_tf32",  # global_flags
    "import os, sys\npid = os.getpid()\nargs = sys.argv",  # process_control
    "import threading\nlock = threading.Lock()",  # threads
    "sock = 'socket'\nrequests = []\nrequests.append(1)",  # network: local names, not modules
    "from triton.language import *\nfrom os import *\nx = arange(0, 4)\ny = getpid()",
    "import re\np = re.compile('x')\nclass M:\n    def eval(self): return self\nM().eval()",  # dynamic_code
    (
        "import torch\nimport triton.language as tl\nd = getattr(torch, 'float16')\ne = getattr(tl, 'float32')\n"
        "class A:\n    pass\na = A()\nname = 'x'\nv = getattr(a, name, None)\nsetattr(a, name, 1)"
    ),
    "import copy, pickle, torch\nt = copy.deepcopy(torch.ones(2))\nb = pickle.dumps(t)",
    "s = 'a.b'.replace('.', '_')\nt = s.rename if hasattr(s, 'rename') else None",  # file_writes
    "text = open('/etc/hostname').read()\nwith open('x', 'rb') as f:\n    pass",
    "import os\np = os.path.join('a', 'b')\nok = os.path.exists(p)",
    "import os\nflag = os.environ.get('KBV3_DEBUG', '0')\nval = os.environ['HOME']\nx = os.getenv('X')",  # environment
    "import os\nos.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\nos.environ.setdefault('MAX_JOBS', '4')",
    '"""Docstrings may mention kernelbench_v3, /proc/self and kill() freely."""\nx = 1',
    (
        "import functools, math, typing\n@functools.lru_cache(maxsize=None)\ndef f(n: typing.Optional[int]) -> float:\n"
        "    return math.sqrt(n)"
    ),
]


# Near misses of the reach rules: literal attribute names, plain module use, public torch.cuda calls.
HONEST += [
    "import torch\nd = getattr(torch, 'float16')\nclass A:\n    pass\nv = getattr(A(), 'x', None)\nok = hasattr(A(), 'y')",
    "import sys\nv = sys.version\nif sys.version_info >= (3, 10):\n    pass\nprint(v, file=sys.stderr)",
    (
        "import torch\ntorch.cuda.synchronize()\ns = torch.cuda.current_stream()\nn = torch.cuda.device_count()\n"
        "e = torch.cuda.Event(enable_timing=True)\nwith torch.cuda.stream(s):\n    pass\nok = torch.cuda.is_available()"
    ),
    "import torch\ns = torch._C._cuda_getCurrentRawStream(0)\ny = torch._C._nn.gelu(torch.ones(1))",
    "from torch._C import _cuda_getCurrentRawStream as get_stream\nimport torch._C",
    "try:\n    import triton\nexcept ImportError:\n    triton = None\nif triton is None or not triton:\n    pass\nok = triton is not None",
    textwrap.dedent("""
        import torch
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                for n in ("a", "b"):
                    setattr(self, n, nn.Parameter(torch.ones(1)))
                w = [getattr(self, k) for k in ["a", "b"]]
                object.__setattr__(self, "c", 1)
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x
    """),
    "import os\nflag = getattr(os, 'sched_getaffinity', None)\nok = hasattr(os, 'fork')",
    "import sys\nif 'triton' in sys.modules and sys.modules['triton'] is not None:\n    pass",
    "import json\ndef load(path: str, codec: json) -> json:\n    return {}",
]


@pytest.mark.parametrize("source", HONEST)
def test_honest_snippet_is_clean(source):
    result = scan(source)
    assert result.ok and result.parsed, result.findings


HONEST_CUDA = r'''
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"

cuda_src = """
#include <torch/extension.h>
__global__ void add_one(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}
torch::Tensor add_one_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    add_one<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_src = "torch::Tensor add_one_cuda(torch::Tensor x);"
ext = load_inline(name="add_one", cpp_sources=cpp_src, cuda_sources=cuda_src,
                  functions=["add_one_cuda"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.add_one_cuda(x.contiguous())
'''


def test_honest_load_inline_solution_is_clean():
    assert scan(HONEST_CUDA).ok, scan(HONEST_CUDA).findings


@pytest.mark.parametrize("path", HONEST_FILES, ids=lambda p: p.name)
def test_honest_example_solutions_are_clean(path):
    result = scan(path.read_text())
    assert result.parsed and result.findings == (), result.summary()


def test_every_example_solution_is_scanned_and_clean():
    examples = sorted(EXAMPLES.glob("**/*.py"))
    assert len(examples) >= 6 and set(examples) <= set(HONEST_FILES)
    dirty = {p.name: scan(p.read_text()).summary() for p in examples if not scan(p.read_text()).ok}
    assert not dirty


def test_reference_problems_scan_clean():
    # The problems are honest torch code written by others: a broad check against false positives.
    problems = sorted(PROBLEMS.glob("**/*.py"))
    assert problems
    dirty = {
        str(p.relative_to(PROBLEMS)): scan(p.read_text()).summary() for p in problems if not scan(p.read_text()).ok
    }
    assert not dirty


def test_repository_cheats_are_named():
    cheats = CHEATS
    patched = scan((cheats / "monkeypatch_torch.py").read_text())
    assert [f.rule for f in patched.findings] == ["monkeypatching"] * 4
    assert patched.findings[0].text.startswith("torch.allclose = ")
    forged = scan((cheats / "forged_result_file.py").read_text())
    assert {f.rule for f in forged.findings} == {"file_writes", "process_control"}


def test_runtime_caches_solution_trips_only_torch_compile():
    result = scan((SOLUTIONS / "runtime_caches_softmax.py").read_text())
    assert {f.rule for f in result.findings} == {"torch_compile"}


def test_findings_are_per_line_and_ordered():
    source = "import os\nimport sys\n\nsys._getframe(0)\nos._exit(1)\nos._exit(2)\n"
    result = scan(source)
    assert [(f.rule, f.line) for f in result.findings] == [
        ("frame_introspection", 4),
        ("process_control", 5),
        ("process_control", 6),
    ]
    assert result.findings[0] == Finding("frame_introspection", 4, "sys._getframe(0)", WHY["frame_introspection"])


def test_long_line_text_is_truncated():
    source = "import os\nos._exit(0)  # " + "x" * 400
    (finding,) = scan(source).findings
    assert len(finding.text) == 160


def test_c_source_finding_points_at_the_offending_line():
    source = 'src = """\nint a;\nint b;\nvoid f() { mprotect(0, 0, 7); }\n"""\n'
    (finding,) = scan(source).findings
    assert (finding.rule, finding.line) == ("native_code", 4)
    assert "mprotect" in finding.text


def test_syntax_error_is_unparseable():
    result = scan("import torch\ndef forward(:\n    pass\n")
    assert not result.parsed and not result.ok
    (finding,) = result.findings
    assert finding.rule == "unparseable" and finding.line == 2
    assert finding.text == "def forward(:"
    assert not scan("x = 1\0").parsed  # null bytes: ast raises ValueError, not SyntaxError


def test_summary():
    assert scan("x = 1").summary() == "no tampering idioms found"
    assert TamperScan((), parsed=True).ok
    one = scan("import sys\nf = sys._getframe(1)\n")
    assert one.summary() == "line 2: f = sys._getframe(1) (frame_introspection: reads or traces the evaluator's frames)"
    many = scan("import sys, os\nsys._getframe(1)\nos._exit(0)\nsys.exit(1)\n")
    assert many.summary() == (
        "line 2: sys._getframe(1) (frame_introspection: reads or traces the evaluator's frames); +2 more"
    )


# Issue 35's bypasses: names built from literals, and the process, tty and loader calls the name
# rules missed. (rule, source): each must name that rule.
COMPUTED = [
    ("dynamic_code", "import pkgutil\nf = pkgutil.resolve_name('os:getpid')"),
    ("process_control", "import pkgutil\nfork = pkgutil.resolve_name('o' + 's:fo' + 'rk')"),
    ("hidden_reach", "import pkgutil\nparts = ['o', 's']\nm = pkgutil.resolve_name(''.join(parts) + ':fork')"),
    ("evaluator_access", "import pkgutil\nm = pkgutil.resolve_name('kernel' + 'bench_v3.evaluate')"),
    ("threads", "import pkgutil\nT = pkgutil.resolve_name(f\"{'threa'}ding:Thread\")"),
    ("hidden_reach", "import importlib\nm = importlib.import_module('c' + 'types')"),
    ("native_code", "import importlib\nm = importlib.import_module('c' + 'types')"),
    ("hidden_reach", "name = input()\nm = __import__(name)"),
    ("process_control", "import torch.multiprocessing as mp\nmp.get_context('fork').Process(target=print).start()"),
    ("process_control", "import torch\nctx = torch.multiprocessing.get_context('fork')"),
    ("process_control", "import os\nfd, _ = os.openpty()\nos.login_tty(fd)"),
    ("process_control", "from os import login_tty\nlogin_tty(3)"),
    ("native_code", "from pathlib import Path\nm = Path('/pr' + 'oc') / '1' / 'mem'"),
    ("native_code", "from pathlib import Path\nm = Path('/') / 'proc' / 'self'"),
    ("native_code", "from pathlib import Path\np = Path('/proc')"),
    ("native_code", "import os\nm = open(os.path.join('/', 'pr' + 'oc', 'self', 'maps'))"),
    ("native_code", "m = open('/'.join(['', 'proc', 'self', 'maps']))"),
    ("native_code", "import os\nm = open(f\"/{'pro'}c/{os.getppid()}/mem\")"),
    ("native_code", "d = 'corp/'[::-1]\nm = open(d + '/1/mem')"),
    ("native_code", "m = open(chr(47) + 'proc/1/mem')"),
    ("native_code", "p = '/p' + 'roc'\nm = open(p)"),
    ("native_code", "import os\nm = open('/pr' + 'oc/' + str(os.getppid()) + '/mem')"),
    ("native_code", "import ctypes\nlibc = ctypes.CDLL(None)\nf = libc['pt' + 'race']"),
    ("native_code", "import ctypes\nlibc = ctypes.CDLL(None)\nname = input()\nf = libc[name]"),
    ("native_code", "import ctypes\nlibc = ctypes.CDLL(None)\nname = input()\nf = getattr(libc, name)"),
]


@pytest.mark.parametrize("rule,source", COMPUTED, ids=[f"{r}-{i}" for i, (r, _) in enumerate(COMPUTED)])
def test_computed_names_are_read_as_what_they_spell(rule, source):
    assert rule in rules(source), scan(source).findings


def test_a_symbol_looked_up_by_computed_name_is_its_own_finding():
    # `import ctypes` is a finding of its own on line 1: the lookups must add theirs on their lines.
    source = "import ctypes\nlibc = ctypes.CDLL(None)\nn = input()\nf = libc[n]\ng = getattr(libc, n)\n"
    assert {(f.rule, f.line) for f in scan(source).findings} >= {("native_code", 4), ("native_code", 5)}


@pytest.mark.parametrize(
    "source",
    [
        "import os\nout = os.path.join('a', 'b' + 'c')",
        "from pathlib import Path\np = Path('data') / ('x' + '.txt')",
        "names = ['a', 'b']\nlabel = '/'.join(names) + f\"{1 + 1}\"",
        "import torch\ny = torch.ones(2)[0:1]\nz = 'process'[:4]",
        "procs = 4\nt = f'/{procs}s'",
    ],
)
def test_built_strings_that_spell_nothing_are_clean(source):
    assert scan(source).ok, scan(source).findings
