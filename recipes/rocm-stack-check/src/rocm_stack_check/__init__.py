"""Does Flash Attention run on this GPU, and how fast? `rocm-stack-check check` and `rocm-stack-check bench`.

Depends on PyTorch and the standard library only (matplotlib, when present, draws the benchmark plot),
so that the same code runs in a recipe's test environment, in CI without a GPU, and in a user's pixi env.
"""

__version__ = "0.1.0"

# A result more than this fraction slower than the one it is compared with is a regression: `bench --compare`'s
# default, and the channel page's (orchestrate imports it, so both say the same). Two back-to-back full runs on
# one H200 agreed within 12% on the 106 passes of 1 ms or more (median ratio 1.00), and two quick runs on one
# H100 moved flash fp16 backward from 9.6x to 8.4x over math (tests/benchmarks/results/h100-quick-bench.md):
# a tighter bound would call that noise a regression.
REGRESSION_THRESHOLD = 0.15
