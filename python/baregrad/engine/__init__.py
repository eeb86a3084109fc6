"""Execution engines; TinyJit lives in baregrad.engine.jit as in tinygrad."""
