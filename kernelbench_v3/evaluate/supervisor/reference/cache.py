"""The on-disk cache of the reference's costly by-products, which is never an answer key.

The solution process can read the whole file system (Landlock leaves it read-only, not
unreadable), so nothing stored here may help it answer: expected outputs are never written.
What is cached is what the supervisor would otherwise recompute for every solution of a problem
and what says nothing about the answers:

- the aten ops the reference dispatches and, on CUDA, the kernels it launches (the profiled
  pass of the reference, with the profiler's start-up),
- which second shape was chosen (the search builds and runs several candidate models),
- on the CPU, the FLOPs of the reference's matrix products (a pass under FlopCounterMode),
- on the CPU, per float64 case, the float64 facts (the reference's own error, the TF32 floor)
  and the float64 residual `ref64 - out` (small numbers, useless without `out`): the deep copies
  and float64 runs of the model. A GPU makes those runs in milliseconds, less than storing,
  reading and pairing them costs (`reference_run.caches_float64`).

On a hit the supervisor still rebuilds the models and inputs from their seeds and runs the
native forward of every case (the expected outputs exist only in its memory). A cached float64
part is used only for a case whose regenerated inputs and recomputed expected output hash to the
sha256 values recorded with it; another case is computed afresh and the entry is rewritten.

An entry is one file `<cache root>/references/<key>.kbref`: 8 magic bytes, the length of a JSON
header (8 bytes, little endian), the header, then the payload (a JSON `meta` followed by raw
tensor bytes). The header echoes the key's fields and carries the payload's sha256 (`sha256_pieces`); a file
whose magic, version, key, fields, hash, or tensor table does not check out is ignored (and
replaced after the recomputation). Tensors are raw bytes described by (dtype, shape, offset):
nothing is unpickled. Writes are atomic (`paths.write_atomically`), so concurrent writers of one
key leave one whole entry. `KBV3_NO_REFERENCE_CACHE=1` turns the cache off.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ....paths import cache_root, write_atomically

CACHE_VERSION = 4  # bump when what is cached, or how it is computed, changes (3: GPU-drawn inputs; 4: no GPU float64)
DISABLE_ENV = "KBV3_NO_REFERENCE_CACHE"
MAGIC = b"KBV3REF\x01"
SUBDIR = "references"
SUFFIX = ".kbref"
_MAX_HEADER = 1 << 20
# Bytes hashed as one piece: larger buffers are hashed in pieces on several threads (hashlib
# lets go of the GIL) and the pieces' digests hashed together, so hashing a 268 MB tensor costs
# its bytes divided among the cores, not one core's sha256 rate.
HASH_PIECE = 32 << 20
HASH_THREADS = max(1, min(8, os.cpu_count() or 1))


class CacheEntryError(ValueError):
    """A cache file that does not check out (torn, tampered, another key or version)."""


def enabled() -> bool:
    return os.environ.get(DISABLE_ENV, "").strip().lower() not in ("1", "true", "yes")


def key_fields(
    problem_sha256: str, sizes: Mapping[str, Any], device: str, cases: Sequence[Any], evaluator_version: int
) -> dict[str, Any]:
    """Everything the cached facts depend on, JSON-normalized (it is echoed in the header)."""
    from ...fingerprint import cpu_name

    fields: dict[str, Any] = {
        "problem_sha256": problem_sha256,
        "sizes": sorted([str(k), v] for k, v in dict(sizes).items()),
        "cases": [c.to_dict() for c in cases],
        "device": device,
        "torch": torch.__version__,
        "cache_version": CACHE_VERSION,
        "evaluator_version": evaluator_version,
    }
    if device == "cuda":
        fields["device_name"] = torch.cuda.get_device_name(torch.cuda.current_device())
        fields["float32_matmul_precision"] = torch.get_float32_matmul_precision()
        fields["cudnn_tf32"] = bool(torch.backends.cudnn.allow_tf32)
    else:
        fields["device_name"] = f"cpu:{cpu_name()}"
    return json.loads(json.dumps(fields, default=str))


def cache_key(fields: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:40]


def sha256_pieces(data: bytes | memoryview) -> str:
    """sha256 of `data` up to HASH_PIECE bytes; beyond, sha256 of the sha256 digests of its
    HASH_PIECE-byte pieces (in order, with the length), computed on HASH_THREADS threads."""
    view = memoryview(data).cast("B")
    if len(view) <= HASH_PIECE:
        return hashlib.sha256(view).hexdigest()
    starts = range(0, len(view), HASH_PIECE)
    with ThreadPoolExecutor(min(HASH_THREADS, len(starts))) as pool:  # joined here: nothing left to fork
        pieces = list(pool.map(lambda i: hashlib.sha256(view[i : i + HASH_PIECE]).digest(), starts))
    return hashlib.sha256(f"pieces{len(view)};".encode() + b"".join(pieces)).hexdigest()


def digest(values: Sequence[Any]) -> str:
    """sha256 of a list of values: tensors by dtype, shape and bytes (moved to the CPU; large
    ones through `sha256_pieces`), the rest by repr."""
    h = hashlib.sha256()
    for v in values:
        if isinstance(v, torch.Tensor):
            h.update(f"T{v.dtype}{tuple(v.shape)};".encode())
            h.update(sha256_pieces(_raw_bytes(v)).encode())
        else:
            h.update(f"V{v!r};".encode())
    return h.hexdigest()


def state_digest(model: torch.nn.Module) -> str:
    state = model.state_dict()
    return digest([x for name in sorted(state) for x in (name, state[name])])


def _raw_bytes(t: torch.Tensor) -> memoryview | bytes:
    """The tensor's bytes, as a view of its CPU copy where it has one: hashing a 268 MB output
    through `tobytes()` copied it once more and took three times as long."""
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else b""


@dataclass
class CachedReference:
    """One entry: `meta` (JSON facts) and named tensors."""

    meta: dict[str, Any]
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)


def encode(fields: Mapping[str, Any], meta: Mapping[str, Any], tensors: Mapping[str, torch.Tensor]) -> bytes:
    meta_bytes = json.dumps(meta, sort_keys=True).encode()
    chunks, table, offset = [meta_bytes], [], len(meta_bytes)
    for name, t in tensors.items():
        raw = _raw_bytes(t)
        table.append({"name": name, "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)})
        table[-1].update(offset=offset, nbytes=len(raw))
        chunks.append(raw)
        offset += len(raw)
    payload = b"".join(chunks)
    header = {
        "format": "kbv3-reference-cache",
        "cache_version": CACHE_VERSION,
        "key": cache_key(fields),
        "key_fields": dict(fields),
        "payload_sha256": sha256_pieces(payload),
        "payload_bytes": len(payload),
        "meta_bytes": len(meta_bytes),
        "tensors": table,
    }
    head = json.dumps(header, sort_keys=True).encode()
    return MAGIC + struct.pack("<Q", len(head)) + head + payload


def decode(data: bytes, fields: Mapping[str, Any]) -> CachedReference:
    """The entry in `data`, verified against `fields`; raises CacheEntryError otherwise."""
    if data[: len(MAGIC)] != MAGIC or len(data) < len(MAGIC) + 8:
        raise CacheEntryError("not a reference cache entry")
    (head_len,) = struct.unpack("<Q", data[len(MAGIC) : len(MAGIC) + 8])
    start = len(MAGIC) + 8
    if head_len > _MAX_HEADER or start + head_len > len(data):
        raise CacheEntryError("header length out of bounds")
    try:
        header = json.loads(data[start : start + head_len])
    except ValueError as exc:
        raise CacheEntryError(f"unreadable header: {exc}") from None
    if not isinstance(header, dict) or header.get("cache_version") != CACHE_VERSION:
        raise CacheEntryError("another cache version")
    if header.get("key") != cache_key(fields) or header.get("key_fields") != dict(fields):
        raise CacheEntryError("the entry is for another key")
    payload = memoryview(data)[start + head_len :]  # a view: the residuals are hundreds of MB
    if len(payload) != header.get("payload_bytes") or sha256_pieces(payload) != header.get("payload_sha256"):
        raise CacheEntryError("the payload does not match its sha256")
    meta_bytes = header.get("meta_bytes")
    if not isinstance(meta_bytes, int) or not 0 <= meta_bytes <= len(payload):
        raise CacheEntryError("meta length out of bounds")
    try:
        meta = json.loads(bytes(payload[:meta_bytes]))
    except ValueError as exc:
        raise CacheEntryError(f"unreadable meta: {exc}") from None
    tensors = {}
    for spec in header.get("tensors") or []:
        tensors[spec["name"]] = _tensor(payload, spec, meta_bytes)
    kinds = {
        "ops": dict,
        "kernel_names": list,
        "states": dict,
        "cases": dict,
        "other_sizes": (dict, type(None)),
        "matmul_flops": (int, float),
    }
    if not isinstance(meta, dict) or any(not isinstance(meta.get(k), t) for k, t in kinds.items()):
        raise CacheEntryError("meta lacks a field")
    return CachedReference(meta, tensors)


def _tensor(payload: memoryview, spec: Mapping[str, Any], low: int) -> torch.Tensor:
    dtype = getattr(torch, str(spec.get("dtype")), None)
    shape, offset, nbytes = spec.get("shape"), spec.get("offset"), spec.get("nbytes")
    if not isinstance(dtype, torch.dtype) or not isinstance(shape, list) or not all(isinstance(n, int) for n in shape):
        raise CacheEntryError(f"bad tensor spec {spec!r}")
    numel = 1
    for n in shape:
        numel *= n
    itemsize = torch.empty((), dtype=dtype).element_size()
    if not isinstance(offset, int) or nbytes != numel * itemsize or offset < low or offset + nbytes > len(payload):
        raise CacheEntryError(f"tensor {spec.get('name')!r} out of bounds")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    # One copy, out of the file's bytes: the tensor is writable and outlives them.
    return torch.frombuffer(bytearray(payload[offset : offset + nbytes]), dtype=dtype).reshape(shape)


@dataclass
class ReferenceCache:
    """The cache entry of one reference computation (a root folder and the key's fields)."""

    root: Path
    fields: dict[str, Any]
    problem: str = ""  # why the last load found nothing usable ("" when it found nothing at all)

    @property
    def path(self) -> Path:
        return Path(self.root) / SUBDIR / f"{cache_key(self.fields)}{SUFFIX}"

    def load(self) -> CachedReference | None:
        try:
            data = self.path.read_bytes()
        except OSError:
            return None
        try:
            return decode(data, self.fields)
        except (CacheEntryError, AttributeError, KeyError, TypeError, ValueError) as exc:
            self.problem = str(exc)[:200]
            return None

    def store(self, meta: Mapping[str, Any], tensors: Mapping[str, torch.Tensor]) -> None:
        try:
            write_atomically(self.path, encode(self.fields, meta, tensors))
        except OSError:
            pass  # a read-only or full cache costs the next evaluation a recomputation, nothing else


def for_evaluation(cache_dir: str | Path | None, fields: Mapping[str, Any]) -> ReferenceCache | None:
    """The cache for the reference `fields` (from `key_fields`) describe, or None when
    KBV3_NO_REFERENCE_CACHE is set."""
    if not enabled():
        return None
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    return ReferenceCache(root, fields)


__all__ = [
    "CACHE_VERSION",
    "DISABLE_ENV",
    "CacheEntryError",
    "CachedReference",
    "ReferenceCache",
    "decode",
    "digest",
    "enabled",
    "encode",
    "for_evaluation",
    "key_fields",
]
