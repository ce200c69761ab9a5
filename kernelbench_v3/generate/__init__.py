"""From prompts to samples: a model's answers to every problem of a split, ready for eval-batch.

Owns talking to an OpenAI-compatible chat-completions endpoint (`client`: one request, its
retries and every way it can fail, as a `Reply`; tool calls too, which `agent` uses) and a
generation run (`run`: which samples are missing, sending them a bounded number at a time,
journaling each answer as it arrives, extracting the solutions into the samples layout
`runs.sample_files` defines). The prompts are
the ones `kbv3 prompts` writes (`prompts.render`); the solutions are cut out by `prompts.extract`.
"""
