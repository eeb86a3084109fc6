"""tinygrad's `tinygrad.uop` package: only the name programs use, `UOp` (see ops.py)."""
from baregrad.uop.ops import UOp  # noqa: F401
