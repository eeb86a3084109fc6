#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/seed-*): small valid
inputs of each format, built here from the format's definition rather than copied binaries.
The cubin seeds need ptxas (PTXAS, $CUDA_PATH/bin, /usr/local/cuda/bin); without one they are
left as they are. Regression inputs (crash-*) in the same folders are never touched.

  tests/fuzz/make_seeds.py
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data: bytes):
  d = os.path.join(CORPUS, target)
  os.makedirs(d, exist_ok=True)
  with open(os.path.join(d, "seed-" + name), "wb") as f: f.write(data)


# ---- safetensors: 8-byte little-endian header length, JSON header, raw data -------------------
def safetensors(tensors, metadata=None, pad=True):
  header, data = {}, b""
  if metadata is not None: header["__metadata__"] = metadata
  for name, (dtype, shape, raw) in tensors.items():
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
  text = json.dumps(header, separators=(",", ":")).encode()
  if pad: text += b" " * (-len(text) % 8)
  return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
  write("safetensors", "empty", safetensors({}))
  write("safetensors", "f32", safetensors({"w": ("F32", [2, 3], struct.pack("<6f", *range(6)))}))
  write("safetensors", "scalar-meta", safetensors({"s": ("I64", [], struct.pack("<q", -7))},
                                                  metadata={"format": "pt", "note": "caf\u00e9"}))
  write("safetensors", "mixed", safetensors({
      "a.bias": ("BF16", [2], b"\x80\x3f\x00\x40"), "b": ("BOOL", [3], b"\x01\x00\x01"),
      "c": ("U8", [0, 4], b""), "d": ("F16", [1, 1], b"\x00\x3c")}))


# ---- cubins: ptxas output for a kernel named "k" --------------------------------------------
PTX = r"""
.version 7.8
.target sm_%(sm)d
.address_size 64
.global .align 4 .u32 counter;
.visible .entry k(.param .u64 out, .param .u64 in, .param .u32 n, .param .f32 s) {
  .reg .pred %%p; .reg .b32 %%r<8>; .reg .f32 %%f<4>; .reg .b64 %%rd<8>;
  .shared .align 4 .f32 tile[64];
  ld.param.u64 %%rd1, [out]; ld.param.u64 %%rd2, [in]; ld.param.u32 %%r1, [n]; ld.param.f32 %%f1, [s];
  mov.u32 %%r2, %%tid.x; mov.u32 %%r3, %%ctaid.x; mov.u32 %%r4, %%ntid.x;
  mad.lo.s32 %%r5, %%r3, %%r4, %%r2; setp.ge.u32 %%p, %%r5, %%r1; @%%p bra done;
  cvta.to.global.u64 %%rd3, %%rd2; mul.wide.u32 %%rd4, %%r5, 4; add.s64 %%rd5, %%rd3, %%rd4;
  ld.global.f32 %%f2, [%%rd5]; and.b32 %%r6, %%r2, 63; shl.b32 %%r7, %%r6, 2;
  st.shared.f32 [tile+0], %%f2; bar.sync 0; ld.shared.f32 %%f3, [tile+0];
  mul.f32 %%f3, %%f3, %%f1; cvta.to.global.u64 %%rd6, %%rd1; add.s64 %%rd7, %%rd6, %%rd4;
  st.global.f32 [%%rd7], %%f3; atom.global.add.u32 %%r6, [counter], 1;
done:
  ret;
}
"""


def find_ptxas():
  for p in (os.environ.get("PTXAS"), os.path.join(os.environ.get("CUDA_PATH", "/usr/local/cuda"), "bin", "ptxas"),
            "/usr/local/cuda/bin/ptxas", shutil.which("ptxas")):
    if p and os.path.isfile(p) and os.access(p, os.X_OK): return p
  return None


def cubin_seeds():
  ptxas = find_ptxas()
  if ptxas is None:
    print("make_seeds: no ptxas: the cubin seeds are left as they are", file=sys.stderr)
    return
  with tempfile.TemporaryDirectory() as d:
    for sm in (80, 90):
      src, out = os.path.join(d, f"k{sm}.ptx"), os.path.join(d, f"k{sm}.cubin")
      with open(src, "w") as f: f.write(PTX % {"sm": sm})
      subprocess.run([ptxas, f"-arch=sm_{sm}", "-O3", "-o", out, src], check=True)
      with open(out, "rb") as f: write("cubin", f"sm{sm}", f.read())


# ---- AMD code objects: LLVM 19's AMDGPU backend and ld.lld for a kernel named "k" -------------
AMDGPU_IR = r"""
@lds = internal addrspace(3) global [64 x float] undef, align 16
@table = hidden addrspace(1) global [2 x i32] [i32 1, i32 2], align 8
@ptr = hidden addrspace(1) global ptr addrspace(1) @table, align 8
declare i32 @llvm.amdgcn.workitem.id.x()
declare void @llvm.amdgcn.s.barrier()
define amdgpu_kernel void @k(ptr addrspace(1) %out, ptr addrspace(1) %in) {
  %t = call i32 @llvm.amdgcn.workitem.id.x()
  %a = getelementptr float, ptr addrspace(1) %in, i32 %t
  %v = load float, ptr addrspace(1) %a
  %l = getelementptr float, ptr addrspace(3) @lds, i32 %t
  store float %v, ptr addrspace(3) %l
  call void @llvm.amdgcn.s.barrier()
  %p = load ptr addrspace(1), ptr addrspace(1) @ptr
  %i = load i32, ptr addrspace(1) %p
  %f = sitofp i32 %i to float
  %w = fmul float %v, %f
  %o = getelementptr float, ptr addrspace(1) %out, i32 %t
  store float %w, ptr addrspace(1) %o
  ret void
}
"""


def amdhsa_seeds():
  llc, lld = "/usr/lib/llvm-19/bin/llc", "/usr/lib/llvm-19/bin/ld.lld"
  if not (os.access(llc, os.X_OK) and os.access(lld, os.X_OK)):
    print("make_seeds: no llc-19 / ld.lld-19: the amdhsa seeds are left as they are", file=sys.stderr)
    return
  with tempfile.TemporaryDirectory() as d:
    src = os.path.join(d, "k.ll")
    with open(src, "w") as f: f.write(AMDGPU_IR)
    for gfx in ("gfx90a", "gfx1100"):
      obj, out = os.path.join(d, gfx + ".o"), os.path.join(d, gfx + ".hsaco")
      subprocess.run([llc, "-mtriple=amdgcn-amd-amdhsa", "-mcpu=" + gfx, "-filetype=obj", "-o", obj, src], check=True)
      subprocess.run([lld, "-shared", obj, "-o", out], check=True)
      with open(out, "rb") as f: write("amdhsa", gfx, f.read())


# ---- QMDs: byte 0 picks the generation (fuzz_qmd.cc), then the QMD's bytes ----------------
def set_bits(buf: bytearray, hi: int, lo: int, value: int):
  """MW(hi:lo) of NVIDIA's qmd headers: bit lo of the QMD as a little-endian bit string."""
  for i in range(hi - lo + 1):
    byte, bit = divmod(lo + i, 8)
    if value >> i & 1: buf[byte] |= 1 << bit
    else: buf[byte] &= ~(1 << bit)


def qmd(version: int) -> bytes:
  q = bytearray(256 if version == 3 else 384)
  if version == 5: set_bits(q, 471, 468, 5)  # QMD_MAJOR_VERSION, clcdc0qmd.h
  else: set_bits(q, 583, 580, version)      # QMD_MAJOR_VERSION, clc6c0qmd.h / clcbc0qmd.h
  return bytes(q)


def qmd_seeds():
  # Generations as fuzz_qmd.cc orders them: 0 Ampere, 1 Ada, 2 Hopper, 3 Blackwell.
  for gen, version in ((0, 3), (1, 3), (2, 3), (2, 4), (3, 5)):
    write("qmd", f"gen{gen}-v{version}", bytes([gen]) + qmd(version))


# ---- the fake GPU: selector, raw GP entries, QMD memory, pushbuffer (fuzz_fake_gpu.cc) -----
def method(subchannel: int, offset: int, *data: int) -> bytes:
  """An incrementing method (SEC_OP 1): 31:29 SEC_OP, 28:16 COUNT, 15:13 SUBCHANNEL, 11:0 offset >> 2."""
  return struct.pack("<I", 1 << 29 | len(data) << 16 | subchannel << 13 | offset >> 2) + struct.pack(f"<{len(data)}I", *data)


DATA_VA, QMD_VA = 0x85_5000_0000, 0x63_3000_0000
# The classes each generation runs (drivers/nv/classes.h): compute, copy.
CLASSES = {0: (0xc6c0, 0xc6b5), 1: (0xcbc0, 0xc8b5), 2: (0xcdc0, 0xc9b5)}  # Ampere, Hopper, Blackwell


def host_release(va: int, payload: int) -> bytes:
  # SEM_ADDR_LO/HI, SEM_PAYLOAD_LO/HI, SEM_EXECUTE (RELEASE, RELEASE_WFI, 64-bit payload).
  return method(0, 0x5c, va & 0xffffffff, va >> 32, payload, 0, 1 | 1 << 20 | 1 << 24)


def fake_gpu_seeds():
  for gen, (compute, copy) in CLASSES.items():
    qmd_bytes = qmd(4 if gen == 1 else 5 if gen == 2 else 3).ljust(384, b"\0")
    pb = method(1, 0, compute) + host_release(DATA_VA, 1)
    pb += method(1, 0x2b4, QMD_VA >> 8, 9)  # SEND_PCAS_A, SEND_SIGNALING_PCAS2_B (PREFETCH_SCHEDULE)
    write("fake_gpu", f"gen{gen}-compute", bytes([gen, 0]) + qmd_bytes + pb)
    # Copy: SET_OBJECT, OFFSET_IN/OUT (upper, lower), LINE_LENGTH_IN, LAUNCH_DMA (pitch, non-pipelined).
    cp = method(4, 0, copy) + method(4, 0x400, DATA_VA >> 32, DATA_VA & 0xffffffff, DATA_VA >> 32,
                                     (DATA_VA + 256) & 0xffffffff) + method(4, 0x418, 64)
    cp += method(4, 0x300, 2 | 1 << 7 | 1 << 8) + host_release(DATA_VA + 512, 2)
    write("fake_gpu", f"gen{gen}-copy", bytes([gen | 4, 0]) + bytes(384) + cp)
  # An acquire that never completes: the pump must return, not spin.
  acquire = method(0, 0x5c, DATA_VA & 0xffffffff, DATA_VA >> 32, 5, 0, 3 | 1 << 24)
  write("fake_gpu", "blocked-acquire", bytes([1, 0]) + bytes(384) + acquire)


if __name__ == "__main__":
  safetensors_seeds()
  cubin_seeds()
  amdhsa_seeds()
  qmd_seeds()
  fake_gpu_seeds()
  for t in sorted(os.listdir(CORPUS)): print(f"make_seeds: {t}: {len(os.listdir(os.path.join(CORPUS, t)))} inputs")
