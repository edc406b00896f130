/* glibc 2.36's arc4random, which GCC 12's static libstdc++ calls for std::random_device, defined in
   the executable itself so that the binary needs glibc 2.35 at most (Ubuntu 22.04 has 2.35). */
#include <stdint.h>
#include <sys/random.h>
uint32_t arc4random(void) {
  uint32_t r;
  while (getrandom(&r, sizeof r, 0) != (ssize_t) sizeof r) {}
  return r;
}
