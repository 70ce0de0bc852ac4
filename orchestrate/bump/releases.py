"""The bump reads upstream through orchestrate/release_files.py, the one reader `orchestrate pins` uses too."""
from __future__ import annotations

from ..release_files import DEFAULT_RAW_BASE, RAW_BASE_ENV, Read, ReadError, World

__all__ = ["DEFAULT_RAW_BASE", "RAW_BASE_ENV", "Read", "ReadError", "World"]
