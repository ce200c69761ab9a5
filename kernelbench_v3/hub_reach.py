"""Whether the Hugging Face Hub can be used right now, decided at once: the offline switches a
user may have set (`HF_HUB_OFFLINE`, `HF_DATASETS_OFFLINE`) and a short probe of the Hub's
host. Shared by the runs dataset (`runs.sources`) and the problems dataset (`dataset.hub`), so an
offline machine fails in seconds with the way out, never after a client's minute of retries.

A leaf like `vocab`: the standard library only, and nothing runs at import.
"""

from __future__ import annotations

import os

HUB_PROBE_S = 3.0  # how long to wait for a connection to the Hub before saying it is unreachable
# The switches huggingface_hub and datasets read; either one means "do not ask the Hub".
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def offline_variable() -> str:
    """The name of the offline switch that is set (`HF_HUB_OFFLINE=1`), or "" when none is."""
    for name in OFFLINE_VARIABLES:
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on"):
            return name
    return ""


def hub_unreachable() -> str:
    """Why the Hub cannot be used right now ("" when it may be): an offline switch is set, or no
    connection to its host (`HF_ENDPOINT`'s) within HUB_PROBE_S."""
    import threading
    from urllib.parse import urlparse

    switch = offline_variable()
    if switch:
        return f"{switch} is set"
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host, port = url.hostname or "huggingface.co", url.port or (443 if url.scheme != "http" else 80)
    outcome: list[str] = []

    def probe() -> None:
        import socket

        try:
            socket.create_connection((host, port), timeout=HUB_PROBE_S).close()
            outcome.append("")
        except OSError as exc:
            outcome.append(f"{host} cannot be reached ({exc.strerror or exc})")

    thread = threading.Thread(target=probe, daemon=True)  # name resolution has no timeout of its own
    thread.start()
    thread.join(HUB_PROBE_S + 1.0)
    return outcome[0] if outcome else f"{host} did not answer within {HUB_PROBE_S:g} s"
