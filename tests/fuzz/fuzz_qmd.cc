// libFuzzer target: the fake GPU's QMD decoder (drivers/mock/nvgpu/qmd_decode.cc). Byte 0
// picks the generation, the rest is the QMD as the GPU reads it from memory: its declared
// version first, then decode_qmd() when that generation runs it.
#include <cstddef>
#include <cstdint>
#include <span>

#include "drivers/mock/nvgpu/qmd_decode.h"

namespace mock = baregrad::mock;
namespace nv = baregrad::nv;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 + mock::kQmdHeadBytes) return 0;
  constexpr nv::Generation kGenerations[] = {nv::Generation::kAmpere, nv::Generation::kAda,
                                             nv::Generation::kHopper, nv::Generation::kBlackwell};
  nv::Generation g = kGenerations[data[0] % 4];
  std::span<const uint8_t> qmd(data + 1, size - 1);
  uint32_t version = mock::qmd_declared_version(g, qmd.first(mock::kQmdHeadBytes));
  if (!mock::qmd_version_runs(g, version) || qmd.size() < mock::qmd_size(version)) return 0;
  (void)mock::decode_qmd(version, qmd);
  return 0;
}
