"""The benchmark's PNG: TFLOP/s per shape and backend. matplotlib is optional and imported only here."""
from __future__ import annotations

from .bench import PASSES


def plot_available() -> tuple[bool, str]:
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        return False, f"matplotlib not installed ({error}); no plot written"
    return True, ""


def write_plot(document: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on build machines and headless GPU hosts
    import matplotlib.pyplot as plt

    rows = document["rows"]
    shapes = list(dict.fromkeys((r["batch"], r["heads"], r["seq_len"], r["head_dim"]) for r in rows))
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    colors = {name: plt.get_cmap("tab10")(i % 10) for i, name in enumerate(backends)}
    figure, axes = plt.subplots(len(PASSES), len(dtypes), figsize=(7 * len(dtypes), 9), squeeze=False,
                                sharex=True)
    for row_index, pass_name in enumerate(PASSES):
        for column_index, dtype in enumerate(dtypes):
            axis = axes[row_index][column_index]
            for backend in backends:
                for causal, style in ((True, "-"), (False, "--")):
                    points = {(r["batch"], r["heads"], r["seq_len"], r["head_dim"]): r[pass_name]["tflops"]
                              for r in rows if r["backend"] == backend and r["dtype"] == dtype
                              and r["causal"] == causal and r[pass_name]["status"] == "ok"}
                    if not points:
                        continue
                    # One line per head dim: joining the last D=64 shape to the first D=128 one would draw a
                    # trend that isn't there.
                    label = f"{backend} {'causal' if causal else 'full'}"
                    for head_dim in dict.fromkeys(shape[3] for shape in points):
                        xs = [i for i, shape in enumerate(shapes) if shape in points and shape[3] == head_dim]
                        axis.plot(xs, [points[shapes[i]] for i in xs], style, marker="o", color=colors[backend],
                                  label=label)
                        label = None
            axis.set_yscale("log")
            axis.set_title(f"{pass_name}, {dtype}")
            axis.set_ylabel("TFLOP/s")
            axis.grid(True, which="both", alpha=0.3)
            axis.set_xticks(range(len(shapes)))
            axis.set_xticklabels([",".join(map(str, s)) for s in shapes], rotation=45, ha="right", fontsize=8)
            if row_index == len(PASSES) - 1:
                axis.set_xlabel("B,H,S,D")
            axis.legend(fontsize=7)
    found = document["platform"]
    runtime = f"HIP {found['hip_version']}" if found.get("hip_version") else f"CUDA {found.get('cuda_version')}"
    figure.suptitle(f"Attention TFLOP/s: {found.get('device_name') or found.get('device')} "
                    f"({found.get('arch')}), PyTorch {found.get('torch_version')}, {runtime}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
