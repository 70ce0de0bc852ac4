"""Does Flash Attention run on this GPU, and how fast? `rocm-stack-check check` and `rocm-stack-check bench`.

Depends on PyTorch and the standard library only (matplotlib, when present, draws the benchmark plot),
so that the same code runs in a recipe's test environment, in CI without a GPU, and in a user's pixi env.
"""

__version__ = "0.1.0"
