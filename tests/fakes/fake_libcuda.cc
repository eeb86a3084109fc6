// A fake CUDA driver library: a TEST INSTRUMENT, not a GPU and not a model of one. It exports
// the driver functions runtime/cuda/cuda_api.h declares, so CudaDevice runs unchanged against
// it on machines without NVIDIA hardware. One device ("Fake CUDA GPU", compute capability 9.0,
// 132 SMs); device memory is host memory (a CUdeviceptr is a host address) and copies are
// memcpy; modules must be sm_90 cubins (ELF, EM_CUDA); kernels never run: cuLaunchKernel
// builds the parameter area from the cubin's EIATTR_KPARAM_INFO records and logs it. Graphs hold
// kernel nodes whose parameter areas are built when the node is added or patched (the driver
// copies the parameters then); cuGraphLaunch logs each node as cuLaunchKernel would. The hooks
// in fake_libcuda.h read the log and make a chosen call fail next.
//
// The kernel node parameter struct is declared here from the driver API reference, not taken
// from our cuda_api.h, so that a layout mistake there fails the tests instead of agreeing with
// itself.
#include "tests/fakes/fake_libcuda.h"

#include <elf.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_api.h"

using namespace baregrad::runtime::cuda;  // NOLINT: the types and values we implement

// The opaque handle types, defined here only.
struct baregrad::runtime::cuda::CUctx_st {
  int refs = 0;
};
struct baregrad::runtime::cuda::CUfunc_st {
  struct Param {
    uint32_t ordinal, offset, size;
  };
  std::string name;
  std::vector<Param> params;
  int registers = 0;
};
struct baregrad::runtime::cuda::CUmod_st {
  std::vector<std::unique_ptr<CUfunc_st>> functions;
};
struct baregrad::runtime::cuda::CUstream_st {};
struct baregrad::runtime::cuda::CUevent_st {
  bool recorded = false;
  float ms = 0;
};
// A kernel node's launch: parameters copied when the node was added or patched.
struct KernelLaunch {
  CUfunction fn = nullptr;
  FakeCudaLaunch launch{};
};
struct baregrad::runtime::cuda::CUgraphNode_st {
  CUgraph graph = nullptr;
  KernelLaunch kernel;
};
struct baregrad::runtime::cuda::CUgraph_st {
  // In the order added: a topological order, since dependencies must exist first.
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
};
struct baregrad::runtime::cuda::CUgraphExec_st {
  std::vector<std::pair<CUgraphNode, KernelLaunch>> nodes;  // a copy taken at instantiation
};

namespace {

// CUDA_KERNEL_NODE_PARAMS (CUDA_KERNEL_NODE_PARAMS_v2_st): what cuGraphAddKernelNode_v2 and
// cuGraphExecKernelNodeSetParams_v2 read, per the driver API reference.
struct KernelNodeParams {
  void* func;  // CUfunction
  uint32_t grid_dim[3];
  uint32_t block_dim[3];
  uint32_t shared_mem_bytes;
  void** kernel_params;
  void** extra;
  void* kern;  // CUkernel, used when func is null
  void* ctx;   // CUcontext, ignored when func is set
};
static_assert(sizeof(KernelNodeParams) == 72, "64-bit driver ABI");
static_assert(offsetof(KernelNodeParams, kernel_params) == 40, "64-bit driver ABI");
static_assert(offsetof(KernelNodeParams, ctx) == 64, "64-bit driver ABI");

constexpr uint16_t kEmCuda = 190;  // e_machine of a cubin
constexpr uint8_t kEifmtSval = 0x04, kEiattrKparamInfo = 0x17, kEiattrRegcount = 0x2f;

struct State {
  std::mutex mu;
  bool initialized = false;
  CUctx_st ctx;
  std::map<uintptr_t, size_t> allocations;  // address -> bytes
  std::set<CUmodule> modules;
  std::set<CUstream> streams;
  std::set<CUevent> events;
  std::set<CUgraph> graphs;
  std::set<CUgraphNode> nodes;  // of live graphs
  std::set<CUgraphExec> execs;
  std::vector<FakeCudaLaunch> launches;
  std::map<std::string, int> calls, fail_next;
  float clock_ms = 0;
};

State& state() {
  static State* s = new State();
  return *s;
}

thread_local CUcontext current = nullptr;

// Counts the call and returns the failure injected for it, if any (state().mu held).
CUresult enter(const char* fn) {
  State& s = state();
  s.calls[fn]++;
  if (auto it = s.fail_next.find(fn); it != s.fail_next.end()) {
    CUresult r = it->second;
    s.fail_next.erase(it);
    return r;
  }
  if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  return CUDA_SUCCESS;
}

// enter() plus a current, retained context.
CUresult enter_ctx(const char* fn) {
  if (CUresult r = enter(fn)) return r;
  return current == &state().ctx && state().ctx.refs > 0 ? CUDA_SUCCESS
                                                         : CUDA_ERROR_INVALID_CONTEXT;
}

#define ENTER(fn)                   \
  std::lock_guard lock(state().mu); \
  if (CUresult r_ = enter(fn)) return r_
#define ENTER_CTX(fn)               \
  std::lock_guard lock(state().mu); \
  if (CUresult r_ = enter_ctx(fn)) return r_

// Whether [p, p + n) lies inside one live allocation.
bool in_allocation(CUdeviceptr p, size_t n) {
  auto& a = state().allocations;
  auto it = a.upper_bound(static_cast<uintptr_t>(p));
  if (it == a.begin()) return false;
  --it;
  return p >= it->first && p + n <= it->first + it->second;
}

// Whether `fn` is a function of a loaded module.
bool live_function(CUfunction fn) {
  for (CUmodule m : state().modules)
    for (auto& f : m->functions)
      if (f.get() == fn) return true;
  return false;
}

// Checks a launch of `fn` and builds what the driver would: the dimensions and the parameter
// area, each parameter's bytes copied from kernel_params[ordinal] (state().mu held).
CUresult build_launch(CUfunction fn,
                      const unsigned dims[6],
                      unsigned shared_bytes,
                      void** kernel_params,
                      void** extra,
                      FakeCudaLaunch* out) {
  if (!fn || !live_function(fn)) return CUDA_ERROR_INVALID_HANDLE;
  if (extra || (!kernel_params && !fn->params.empty())) return CUDA_ERROR_INVALID_VALUE;
  if (!dims[0] || !dims[1] || !dims[2] || !dims[3] || !dims[4] || !dims[5] ||
      uint64_t{dims[3]} * dims[4] * dims[5] > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  FakeCudaLaunch l{};
  std::snprintf(l.function, sizeof(l.function), "%s", fn->name.c_str());
  std::copy(dims, dims + 3, l.grid);
  std::copy(dims + 3, dims + 6, l.block);
  l.shared_bytes = shared_bytes;
  for (const auto& p : fn->params) {
    if (p.offset + p.size > sizeof(l.params) || !kernel_params[p.ordinal])
      return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(l.params + p.offset, kernel_params[p.ordinal], p.size);
    l.param_bytes = std::max(l.param_bytes, p.offset + p.size);
  }
  *out = l;
  return CUDA_SUCCESS;
}

// build_launch for a kernel node; only `func` is supported (a CUkernel is refused).
CUresult build_node(const void* params, KernelLaunch* out) {
  if (!params) return CUDA_ERROR_INVALID_VALUE;
  KernelNodeParams p;
  std::memcpy(&p, params, sizeof(p));
  if (!p.func) return CUDA_ERROR_INVALID_VALUE;
  unsigned dims[6] = {p.grid_dim[0],  p.grid_dim[1],  p.grid_dim[2],
                      p.block_dim[0], p.block_dim[1], p.block_dim[2]};
  out->fn = static_cast<CUfunction>(p.func);
  return build_launch(out->fn, dims, p.shared_mem_bytes, p.kernel_params, p.extra, &out->launch);
}

// Logs `l` as run on `stream` (state().mu held).
void run(FakeCudaLaunch l, CUstream stream, CUgraphExec exec) {
  l.stream = stream;
  l.graph_exec = exec;
  state().launches.push_back(l);
  state().clock_ms += kFakeCudaLaunchMs;
}

bool valid_stream(CUstream stream) { return !stream || state().streams.count(stream); }

template <class T>
T read(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The functions of a cubin: STT_FUNC symbols, their parameters (.nv.info.<name>) and registers
// (.nv.info). The image has no size argument: the ELF header is trusted, like the driver does.
CUresult parse_cubin(const uint8_t* img, CUmod_st& mod) {
  if (std::memcmp(img, ELFMAG, SELFMAG) != 0 || img[EI_CLASS] != ELFCLASS64)
    return CUDA_ERROR_INVALID_IMAGE;
  auto eh = read<Elf64_Ehdr>(img);
  if (eh.e_machine != kEmCuda) return CUDA_ERROR_INVALID_IMAGE;
  int sm = static_cast<int>(eh.e_ident[EI_ABIVERSION] >= 8 ? (eh.e_flags >> 8) & 0xff
                                                           : eh.e_flags & 0xff);
  if (sm != 90) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  for (size_t i = 0; i < sh.size(); i++)
    sh[i] = read<Elf64_Shdr>(img + eh.e_shoff + i * eh.e_shentsize);
  auto sec_name = [&](const Elf64_Shdr& s) {
    return std::string(
        reinterpret_cast<const char*>(img + sh[eh.e_shstrndx].sh_offset + s.sh_name));
  };
  std::map<uint32_t, CUfunc_st*> by_index;
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_SYMTAB) continue;
    const char* strtab = reinterpret_cast<const char*>(img + sh[s.sh_link].sh_offset);
    for (size_t i = 0; i < s.sh_size / sizeof(Elf64_Sym); i++) {
      auto sym = read<Elf64_Sym>(img + s.sh_offset + i * sizeof(Elf64_Sym));
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC) continue;
      mod.functions.push_back(std::make_unique<CUfunc_st>());
      mod.functions.back()->name = strtab + sym.st_name;
      by_index[static_cast<uint32_t>(i)] = mod.functions.back().get();
    }
  }
  // .nv.info records: format byte, attribute byte, u16 size-or-value, then the payload of
  // `size` bytes when the format is EIFMT_SVAL.
  auto records = [&](const Elf64_Shdr& s, auto&& each) {
    for (size_t off = 0; off + 4 <= s.sh_size;) {
      const uint8_t* p = img + s.sh_offset + off;
      uint16_t size = p[0] == kEifmtSval ? read<uint16_t>(p + 2) : 0;
      each(p[1], p + 4, size);
      off += 4 + size;
    }
  };
  for (const Elf64_Shdr& s : sh) {
    std::string name = sec_name(s);
    if (name == ".nv.info") {
      records(s, [&](uint8_t attr, const uint8_t* p, uint16_t size) {
        if (attr == kEiattrRegcount && size >= 8 && by_index.count(read<uint32_t>(p)))
          by_index[read<uint32_t>(p)]->registers = static_cast<int>(read<uint32_t>(p + 4));
      });
    } else if (name.starts_with(".nv.info.")) {
      for (auto& f : mod.functions) {
        if (f->name != name.substr(9)) continue;
        records(s, [&](uint8_t attr, const uint8_t* p, uint16_t size) {
          if (attr != kEiattrKparamInfo || size < 12) return;
          uint32_t ord_off = read<uint32_t>(p + 4);
          f->params.push_back({ord_off & 0xffff, ord_off >> 16, read<uint32_t>(p + 8) >> 18});
        });
      }
    }
  }
  return CUDA_SUCCESS;
}

struct Description {
  CUresult r;
  const char* name;
  const char* text;
};
constexpr Description kDescriptions[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const Description* describe(CUresult r) {
  for (const Description& d : kDescriptions)
    if (d.r == r) return &d;
  return nullptr;
}

}  // namespace

extern "C" {

// ---- the driver API ----

CUresult cuInit(unsigned flags) {
  std::lock_guard lock(state().mu);
  state().calls["cuInit"]++;
  if (auto it = state().fail_next.find("cuInit"); it != state().fail_next.end()) {
    CUresult r = it->second;
    state().fail_next.erase(it);
    return r;
  }
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  state().initialized = true;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  std::lock_guard lock(state().mu);
  state().calls["cuDriverGetVersion"]++;
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = kFakeCudaDriverVersion;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  ENTER("cuDeviceGetCount");
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* dev, int ordinal) {
  ENTER("cuDeviceGet");
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *dev = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  ENTER("cuDeviceGetName");
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<size_t>(len), "%s", kFakeCudaName);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev) {
  ENTER("cuDeviceGetAttribute");
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 9;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = kFakeCudaSmCount;
      return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  ENTER("cuDeviceTotalMem_v2");
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = kFakeCudaTotalMem;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  ENTER("cuDevicePrimaryCtxRetain");
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  state().ctx.refs++;
  *ctx = &state().ctx;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  ENTER("cuDevicePrimaryCtxRelease_v2");
  if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
  if (state().ctx.refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  state().ctx.refs--;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  ENTER("cuCtxSetCurrent");
  if (ctx && ctx != &state().ctx) return CUDA_ERROR_INVALID_CONTEXT;
  current = ctx;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize() {
  ENTER_CTX("cuCtxSynchronize");
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  ENTER_CTX("cuModuleLoadData");
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  auto mod = std::make_unique<CUmod_st>();
  if (CUresult r = parse_cubin(static_cast<const uint8_t*>(image), *mod)) return r;
  *module = mod.release();
  state().modules.insert(*module);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* fn, CUmodule module, const char* name) {
  ENTER("cuModuleGetFunction");
  if (!state().modules.count(module)) return CUDA_ERROR_INVALID_HANDLE;
  if (!fn || !name || !*name) return CUDA_ERROR_INVALID_VALUE;
  for (auto& f : module->functions)
    if (f->name == name) {
      *fn = f.get();
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult cuModuleUnload(CUmodule module) {
  ENTER("cuModuleUnload");
  if (!state().modules.erase(module)) return CUDA_ERROR_INVALID_HANDLE;
  delete module;
  return CUDA_SUCCESS;
}

CUresult cuFuncGetAttribute(int* value, CUfunction_attribute attrib, CUfunction fn) {
  ENTER("cuFuncGetAttribute");
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  if (attrib != CU_FUNC_ATTRIBUTE_NUM_REGS) return CUDA_ERROR_INVALID_VALUE;
  *value = fn->registers;
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction fn,
                        unsigned gx,
                        unsigned gy,
                        unsigned gz,
                        unsigned bx,
                        unsigned by,
                        unsigned bz,
                        unsigned shared_bytes,
                        CUstream stream,
                        void** kernel_params,
                        void** extra) {
  ENTER_CTX("cuLaunchKernel");
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  unsigned dims[6] = {gx, gy, gz, bx, by, bz};
  FakeCudaLaunch l;
  if (CUresult r = build_launch(fn, dims, shared_bytes, kernel_params, extra, &l)) return r;
  run(l, stream, nullptr);
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  ENTER_CTX("cuMemAlloc_v2");
  if (!ptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t rounded = (bytes + 255) / 256 * 256;
  void* p = std::aligned_alloc(256, rounded);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, 0xcd, rounded);  // device memory is not zeroed
  *ptr = reinterpret_cast<uintptr_t>(p);
  state().allocations[*ptr] = bytes;
  return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  ENTER_CTX("cuMemFree_v2");
  auto it = state().allocations.find(static_cast<uintptr_t>(ptr));
  if (it == state().allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  std::free(reinterpret_cast<void*>(it->first));
  state().allocations.erase(it);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  ENTER_CTX("cuMemcpyHtoD_v2");
  if (!in_allocation(dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  ENTER_CTX("cuMemcpyDtoH_v2");
  if (!in_allocation(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  ENTER_CTX("cuMemcpyDtoD_v2");
  if (!in_allocation(dst, bytes) || !in_allocation(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  ENTER_CTX("cuMemcpyDtoDAsync_v2");
  if (!valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  if (!in_allocation(dst, bytes) || !in_allocation(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count) {
  ENTER_CTX("cuMemsetD8_v2");
  if (!in_allocation(dst, count)) return CUDA_ERROR_INVALID_VALUE;
  std::memset(reinterpret_cast<void*>(dst), value, count);
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream* stream, unsigned flags) {
  ENTER_CTX("cuStreamCreate");
  if (!stream || flags > 1) return CUDA_ERROR_INVALID_VALUE;
  *stream = new CUstream_st();
  state().streams.insert(*stream);
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
  ENTER_CTX("cuStreamDestroy_v2");
  if (!state().streams.erase(stream)) return CUDA_ERROR_INVALID_HANDLE;
  delete stream;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  ENTER_CTX("cuStreamSynchronize");
  if (stream && !state().streams.count(stream)) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent* event, unsigned flags) {
  ENTER_CTX("cuEventCreate");
  if (!event || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *event = new CUevent_st();
  state().events.insert(*event);
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent event) {
  ENTER("cuEventDestroy_v2");
  if (!state().events.erase(event)) return CUDA_ERROR_INVALID_HANDLE;
  delete event;
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
  ENTER_CTX("cuEventRecord");
  if (!state().events.count(event)) return CUDA_ERROR_INVALID_HANDLE;
  if (stream && !state().streams.count(stream)) return CUDA_ERROR_INVALID_HANDLE;
  event->recorded = true;
  event->ms = state().clock_ms;
  return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent event) {
  ENTER("cuEventSynchronize");
  return state().events.count(event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  ENTER("cuEventElapsedTime");
  if (!state().events.count(start) || !state().events.count(end)) return CUDA_ERROR_INVALID_HANDLE;
  if (!start->recorded || !end->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *ms = end->ms - start->ms;
  return CUDA_SUCCESS;
}

// ---- graphs: kernel nodes only ----

CUresult cuGraphCreate(CUgraph* graph, unsigned flags) {
  ENTER_CTX("cuGraphCreate");
  if (!graph || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *graph = new CUgraph_st();
  state().graphs.insert(*graph);
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph graph) {
  ENTER_CTX("cuGraphDestroy");
  if (!state().graphs.erase(graph)) return CUDA_ERROR_INVALID_VALUE;
  for (auto& n : graph->nodes) state().nodes.erase(n.get());
  delete graph;
  return CUDA_SUCCESS;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode* node,
                                 CUgraph graph,
                                 const CUgraphNode* dependencies,
                                 size_t num_dependencies,
                                 const void* params) {
  ENTER_CTX("cuGraphAddKernelNode_v2");
  if (!node || !state().graphs.count(graph)) return CUDA_ERROR_INVALID_VALUE;
  if (num_dependencies && !dependencies) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < num_dependencies; i++)
    if (!state().nodes.count(dependencies[i]) || dependencies[i]->graph != graph)
      return CUDA_ERROR_INVALID_VALUE;
  auto n = std::make_unique<CUgraphNode_st>();
  n->graph = graph;
  if (CUresult r = build_node(params, &n->kernel)) return r;
  *node = n.get();
  state().nodes.insert(n.get());
  graph->nodes.push_back(std::move(n));
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  ENTER_CTX("cuGraphInstantiateWithFlags");
  if (!exec || !state().graphs.count(graph) || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *exec = new CUgraphExec_st();
  for (auto& n : graph->nodes) (*exec)->nodes.emplace_back(n.get(), n->kernel);
  state().execs.insert(*exec);
  return CUDA_SUCCESS;
}

CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec exec, CUgraphNode node, const void* params) {
  ENTER_CTX("cuGraphExecKernelNodeSetParams_v2");
  // The node must still be in the graph the executable graph was instantiated from.
  if (!state().execs.count(exec) || !state().nodes.count(node)) return CUDA_ERROR_INVALID_VALUE;
  for (auto& [n, kernel] : exec->nodes) {
    if (n != node) continue;
    KernelLaunch k;
    if (CUresult r = build_node(params, &k)) return r;
    kernel = k;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  ENTER_CTX("cuGraphLaunch");
  if (!state().execs.count(exec) || !valid_stream(stream)) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& [n, kernel] : exec->nodes)
    if (!live_function(kernel.fn)) return CUDA_ERROR_INVALID_HANDLE;  // its module was unloaded
  for (auto& [n, kernel] : exec->nodes) run(kernel.launch, stream, exec);
  return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  ENTER_CTX("cuGraphExecDestroy");
  if (!state().execs.erase(exec)) return CUDA_ERROR_INVALID_VALUE;
  delete exec;
  return CUDA_SUCCESS;
}

// Like the driver: usable before cuInit; CUDA_ERROR_INVALID_VALUE (and *out = NULL) for a value
// it does not know.
CUresult cuGetErrorName(CUresult error, const char** out) {
  const Description* d = describe(error);
  *out = d ? d->name : nullptr;
  return d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char** out) {
  const Description* d = describe(error);
  *out = d ? d->text : nullptr;
  return d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// ---- test hooks (fake_libcuda.h) ----

void fake_cuda_reset() {
  std::lock_guard lock(state().mu);
  state().launches.clear();
  state().calls.clear();
  state().fail_next.clear();
}

void fake_cuda_fail_next(const char* function, int result) {
  std::lock_guard lock(state().mu);
  state().fail_next[function] = result;
}

int fake_cuda_launch_count() {
  std::lock_guard lock(state().mu);
  return static_cast<int>(state().launches.size());
}

int fake_cuda_get_launch(int i, FakeCudaLaunch* out) {
  std::lock_guard lock(state().mu);
  if (i < 0 || i >= static_cast<int>(state().launches.size())) return -1;
  *out = state().launches[static_cast<size_t>(i)];
  return 0;
}

int fake_cuda_calls(const char* function) {
  std::lock_guard lock(state().mu);
  auto it = state().calls.find(function);
  return it == state().calls.end() ? 0 : it->second;
}

int fake_cuda_live(const char* kind) {
  std::lock_guard lock(state().mu);
  std::string k = kind;
  if (k == "allocations") return static_cast<int>(state().allocations.size());
  if (k == "modules") return static_cast<int>(state().modules.size());
  if (k == "streams") return static_cast<int>(state().streams.size());
  if (k == "events") return static_cast<int>(state().events.size());
  if (k == "primary_ctx_refs") return state().ctx.refs;
  if (k == "graphs") return static_cast<int>(state().graphs.size());
  if (k == "graph_execs") return static_cast<int>(state().execs.size());
  return -1;
}

}  // extern "C"
