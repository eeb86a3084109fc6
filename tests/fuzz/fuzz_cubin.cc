// libFuzzer target: the cubin loader (drivers/nv/cubin.cc), what the NVIDIA driver runs on
// every compiled kernel before uploading it, then relocate() at a GPU address. Any input is
// either an image or InvalidArgument naming what is wrong; never a crash.
#include <cstddef>
#include <cstdint>
#include <span>

#include "drivers/nv/cubin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The seeds' kernel is "k" (make_seeds.py); any other name exercises the not-found path.
  auto img = baregrad::nv::load_cubin(std::span(data, size), "k");
  if (!img.ok()) return 0;
  if (img->image.size() > img->image_size) __builtin_trap();
  (void)baregrad::nv::relocate(*img, 0x7f'0000'0000);
  return 0;
}
