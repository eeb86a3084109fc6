"""tinygrad's `tinygrad.uop` package: `UOp`, `Ops` and `GroupOp` (see ops.py)."""
from baregrad.uop.ops import GroupOp, Ops, UOp  # noqa: F401
