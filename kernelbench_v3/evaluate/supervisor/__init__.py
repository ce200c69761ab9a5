"""The trusted side of one evaluation: the run end to end (`evaluation`), the conversation with
the solution process (`session`), the reference and its caches (`reference`, `reference_cache`,
`warm_references`), the baseline in a reference-only child (`baseline`, `child`, `isolate`),
timing by the supervisor's own clock (`clock`, and the `timing` room: one entry, `timing.measure`), the verdict and its
checks (`verdict`, `checks`, `kernel_rule`, `tamper_scan`, `scan_reach`), and the record's timing
fields and summary (`scoring`, `report`, `fingerprint`). It imports nothing from `solution`
except `zygote`, to start it."""
