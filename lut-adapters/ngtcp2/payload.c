#include "payload.h"

#include <string.h>

#define NQ_SEED 0x6e65737175696321ull /* "nesquic!" */

uint8_t nq_block[NQ_BLOCK];

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
  for (uint32_t i = NQ_PERIOD; i < NQ_BLOCK; i++) nq_block[i] = nq_block[i - NQ_PERIOD];
}

int nq_payload_verify(uint64_t offset, const uint8_t *data, size_t len, uint64_t *bad) {
  /* Every piece is compared with the same period of the block, the one at the chunk's phase. */
  const uint8_t *reference = nq_block + offset % NQ_PERIOD;
  for (size_t pos = 0; pos < len; pos += NQ_PERIOD) {
    size_t n = len - pos < NQ_PERIOD ? len - pos : NQ_PERIOD;
    if (memcmp(data + pos, reference, n) != 0) {
      size_t i = 0;
      while (data[pos + i] == reference[i]) i++;
      *bad = offset + pos + i;
      return 0;
    }
  }
  return 1;
}
