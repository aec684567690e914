#include "payload.h"

#include <string.h>

#define NQ_SEED 0x6e65737175696321ull /* "nesquic!" */

uint8_t nq_block[NQ_PERIOD];

static uint64_t splitmix64(uint64_t n) {
  uint64_t z = (n + NQ_SEED) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void nq_payload_init(void) {
  for (uint32_t i = 0; i < NQ_PERIOD; i++) {
    nq_block[i] = (uint8_t)(splitmix64(i / 8) >> (8 * (i % 8)));
  }
}

int nq_payload_verify(uint64_t offset, const uint8_t *data, size_t len, uint64_t *bad) {
  size_t pos = 0;
  while (pos < len) {
    size_t phase = (size_t)((offset + pos) % NQ_PERIOD);
    size_t n = NQ_PERIOD - phase;
    if (n > len - pos) n = len - pos;
    if (memcmp(data + pos, nq_block + phase, n) != 0) {
      size_t i = 0;
      while (data[pos + i] == nq_block[phase + i]) i++;
      *bad = offset + pos + i;
      return 0;
    }
    pos += n;
  }
  return 1;
}
