"""Exit codes shared by `check` and `bench`; recipes and CI scripts branch on them."""

OK = 0
# check: a GPU is there but Flash Attention (or flash-attn) fails where the architecture table says it
# should work. bench: a row regressed against the --compare baseline.
FAILED = 1
USAGE = 2  # argparse's own code for bad arguments
# No usable GPU (no PyTorch, or PyTorch sees no device, or not the --expect-arch GPU). `check` returns this,
# naming the cause, unless --allow-no-gpu: recipe tests run on build machines without GPUs and pass it.
NO_GPU = 3
