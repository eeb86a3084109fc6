// libFuzzer target: the AMD code-object loader (drivers/amd/code_object.cc), what the AMD driver
// runs on every compiled kernel before uploading it, then relocate() at a GPU address. Any input
// is either a code object or InvalidArgument naming what is wrong; never a crash.
#include <cstddef>
#include <cstdint>
#include <span>

#include "drivers/amd/code_object.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The seeds' kernel is "k" (make_seeds.py); any other name exercises the not-found path.
  auto co = baregrad::amd::load_code_object(std::span(data, size), "k");
  if (!co.ok()) return 0;
  if (co->code_offset >= co->image.size() ||
      co->descriptor_offset + sizeof(baregrad::amd::KernelDescriptor) > co->image.size())
    __builtin_trap();
  (void)baregrad::amd::relocate(*co, 0x7f'0000'0000);
  return 0;
}
