"""Many evaluations at once: what a batch is and how it resumes (`run`), the work queue
(`queue`), the durable journal (`journal`) and where evaluations run (`executors`)."""
