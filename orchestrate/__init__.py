"""Build the ROCm ML stack for one GPU architecture into a conda channel: discover → render → graph →
build → channel → share."""

__version__ = "0.1.0"
