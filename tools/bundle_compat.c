// Linked into the bundle's binaries only (tools/bundle.sh): arc4random, which the static
// libstdc++ (std::random_device) takes from glibc 2.36, defined here so that the binaries run
// on glibc 2.35 (Ubuntu 22.04) as well. getrandom(2) is what glibc's own arc4random uses.
#include <stdint.h>
#include <sys/random.h>
#include <time.h>

uint32_t arc4random(void) {
  uint32_t v;
  for (int i = 0; i < 100; i++)
    if (getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v) return v;
  struct timespec t;  // no getrandom (a kernel before 3.17): the clock, never an error
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint32_t)(t.tv_nsec ^ (t.tv_sec << 20));
}
