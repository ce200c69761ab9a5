"""The trusted side of one evaluation: the run end to end (`evaluation`) and its phases
(`phases`: where the seconds go), the conversation with the solution process (`session`,
`candidate`: the candidate phase step by step; `pause`: stopping the solution's side between
timed windows; `zygote_pool`: warm zygotes for long-lived supervisors), the reference and its
caches (`reference`, `reference_cache`, `warm_references`), the baseline in a reference-only
child (`baseline`, `child`, `isolate`), timing by the supervisor's own clock (`timing_phase`:
the timing region and the trusted echo; `clock`: the solution's calls and their judging; the
`timing` room, entered through `timing.measure`: the one-call windows (`sides`, `local`), the
timer's own device work (`device_work`), the memory of the timed calls (`memory`), the output
copied at DONE for judging (`snapshot`), the checks around the windows (`checks`), the estimator
(`stats`) and the floor below which a time is not scored (`resolution`), shared with the
baseline child), the verdict and its checks (`verdict`, `checks`, `kernel_rule`, `physics`,
`tamper_scan`, `scan_names`, `scan_reach`), and the record's timing fields and summary
(`scoring`, `report`, `fingerprint`). It imports nothing from `solution` except `zygote`, to
start it."""
