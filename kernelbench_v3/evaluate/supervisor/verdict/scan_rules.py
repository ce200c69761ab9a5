"""The tamper scan's rule table: what each rule means (`WHY`), the dotted names (`NAMES`) and
attributes (`ATTRS`) that break it, the private twins of public modules, and the textual patterns
(native tokens in strings, write modes, environment keys honest builds set).

Data only: `tamper_scan` walks a solution's source and applies these; a rule is added here once
and read there.
"""

from __future__ import annotations

import re

from . import scan_reach

WHY: dict[str, str] = {
    "frame_introspection": "reads or traces the evaluator's frames",
    "gc_introspection": "walks the garbage collector to reach the evaluator's objects",
    "evaluator_access": "reaches into the evaluator's own modules",
    "monkeypatching": "replaces an attribute of a module or library class the evaluator relies on",
    "global_flags": "changes process-wide torch numerics flags",
    "process_control": "exits, forks, signals or spawns processes",
    "threads": "runs code concurrently with the evaluator",
    "network": "talks to the network",
    "dynamic_code": "runs or reaches code a static reader cannot see",
    "native_code": "reaches native memory or syscalls outside a plain load_inline kernel",
    "file_writes": "writes to the file system",
    "torch_compile": "uses torch.compile instead of its own kernels",
    "environment": "changes the process environment",
    **scan_reach.REACH_WHY,  # hidden_reach, dynamic_attribute, torch_private
    "unparseable": "the source does not parse, so it cannot be scanned",
}

# Dotted names by rule: "x" matches x and x.*; "x*" matches every name that starts with x.
NAMES: dict[str, tuple[str, ...]] = {
    rule: tuple(names.split())
    for rule, names in {
        "frame_introspection": "sys._getframe sys._current_frames sys.settrace sys.setprofile sys.addaudithook "
        "sys.monitoring inspect.stack inspect.currentframe inspect.getouterframes inspect.getinnerframes "
        "inspect.getframeinfo inspect.trace traceback.extract_stack traceback.walk_stack threading.settrace* "
        "threading.setprofile*",
        "gc_introspection": "gc.get_objects gc.get_referrers gc.get_referents",
        "evaluator_access": "kernelbench_v3 __main__",  # in the child, __main__ is the evaluator's entry script
        "global_flags": "torch.set_float32_matmul_precision torch.use_deterministic_algorithms "
        "torch.set_default_dtype torch.set_default_device torch.set_flush_denormal",
        "process_control": "os._exit os.abort os.kill os.killpg os.fork os.forkpty os.setsid os.setpgid os.setpgrp "
        "os.exec* os.spawn* os.posix_spawn* os.system os.popen subprocess _posixsubprocess multiprocessing pty "
        "torch.multiprocessing os.login_tty os.openpty os.tcsetpgrp os.pidfd_open os.register_at_fork tty termios "
        "signal.signal signal.setitimer signal.alarm signal.pthread_kill signal.raise_signal "
        "signal.pidfd_send_signal atexit sys.exit builtins.exit builtins.quit",
        "threads": "threading.Thread threading.Timer _thread concurrent.futures asyncio",
        "network": "socket ssl urllib urllib3 http requests httpx aiohttp ftplib smtplib xmlrpc websocket*",
        "dynamic_code": "builtins.exec builtins.eval builtins.compile builtins.__import__ importlib runpy marshal "
        "pkgutil.resolve_name pkgutil.get_loader pkgutil.find_loader pkgutil.get_importer pkgutil.iter_importers "
        "zipimport imp sys.meta_path sys.path_hooks sys.path_importer_cache "
        "pickle.loads pickle.load pickle.Unpickler types.FunctionType types.LambdaType types.CodeType",
        "native_code": "ctypes cffi mmap torch.ops.load_library torch.classes.load_library",
        "file_writes": "os.remove os.unlink os.rename os.renames os.replace os.makedirs os.mkdir os.rmdir "
        "os.removedirs os.chmod os.chown os.symlink os.link os.truncate os.ftruncate os.write os.dup2 shutil "
        "tempfile torch.save",
        "torch_compile": "torch.compile torch._dynamo torch._inductor",
        "environment": "os.putenv os.unsetenv",
    }.items()
}
# Attributes that only introspection or code surgery reads, whatever object they hang off.
ATTRS: dict[str, str] = {
    **dict.fromkeys(
        ("f_back", "f_locals", "f_globals", "tb_frame", "gi_frame", "cr_frame", "ag_frame"), "frame_introspection"
    ),
    **dict.fromkeys(
        ("__subclasses__", "__globals__", "__code__", "__closure__", "func_globals", "co_code", "__builtins__"),
        "dynamic_code",
    ),
    "ptrace": "native_code",
}
# Private twins of public modules, so `import posix; posix._exit(0)` reads as os._exit.
TWINS = {
    "posix": "os",
    "nt": "os",
    "_signal": "signal",
    "_socket": "socket",
    "_io": "io",
    "_pickle": "pickle",
    "_ctypes": "ctypes",
    "_gc": "gc",
}
NATIVE_TEXT = re.compile(
    r"dlsym|dlopen|ptrace|process_vm_|/proc\b|/dev/k?mem\b|\bsyscall\s*\(|"
    r"\bfork\s*\(|\bkill\s*\(|mprotect|LD_PRELOAD"
)
WRITE_MODE = re.compile(r"[rbtU]*[wax+][rwxabtU+]*")
SETTERS = {
    "builtins.setattr",
    "builtins.delattr",
    "builtins.object.__setattr__",
    "builtins.object.__delattr__",
    "builtins.type.__setattr__",
}
OPENERS = {"builtins.open", "io.open", "codecs.open", "os.fdopen"}
MUTATORS = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"}
PATH_WRITES = {"write_text", "write_bytes", "unlink", "touch", "mkdir", "rmdir", "symlink_to", "hardlink_to"}
PATH_MOVES = {"rename", "replace", "chmod"}  # also str/DataFrame methods: only on pathlib objects
OS_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
ENVIRON = ("os.environ", "os.environb")
# Honest load_inline solutions pin these for their own nvcc build; nothing else may be written.
BUILD_ENV = frozenset({"TORCH_CUDA_ARCH_LIST", "MAX_JOBS"})
RULE_RE = {
    rule: re.compile("|".join(re.escape(p[:-1]) if p.endswith("*") else re.escape(p) + r"(?:\.|$)" for p in patterns))
    for rule, patterns in NAMES.items()
}
