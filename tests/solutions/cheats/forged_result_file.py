"""CHEAT (forged result file): writes a result file into the evaluator's folder and exits
before the evaluator can write its own."""
import json
import os

with open("result_candidate.json", "w") as f:
    json.dump({"ok": True, "stage": "done", "cases": {}, "nonce": "guess"}, f)
os._exit(0)
