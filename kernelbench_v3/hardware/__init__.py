"""What the hardware can do: the split GPUs' sourced peak figures (`gpus`) and each problem's
FLOPs, minimal bytes and speed-of-light time (`roofline`)."""
