"""Published and local runs: the runs schema (`schema`), loading and joining (`load`), the
leaderboard and anomaly flags (`analysis`), figures (`plots`), per-problem facts (`facts`) and
the static custom-kernel scan of solutions (`solution_scan`)."""
