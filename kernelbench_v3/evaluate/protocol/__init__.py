"""What the supervisor and a solution process say to each other, and nothing else: the data-only
channel (`channel`: bounded JSON frames and a shared arena of raw tensors), the typed messages
and the checks on every reply (`messages`), and the CUDA IPC sharing of the timing region
(`cuda_ipc`). Both sides import this; it imports neither."""
