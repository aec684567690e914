/* The benchmark payload (docs/protocol.md): a block of PERIOD pattern bytes. The server hands
 * ngtcp2 pointers into it (ngtcp2 keeps them until acknowledged: no copy of ours); the client
 * compares what arrives with memcmp. */
#ifndef NQ_PAYLOAD_H
#define NQ_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>

#define NQ_PERIOD 131071u /* 2^17 - 1, a prime: no packet, GSO segment or buffer size divides it */
#define NQ_REQUEST_LEN 8  /* the request: the payload size as a big-endian uint64 */

/* The pattern block (PERIOD bytes), built once by nq_payload_init. */
extern uint8_t nq_block[NQ_PERIOD];

void nq_payload_init(void);

/* Checks `len` received bytes at stream offset `offset`; on a mismatch returns 0 and stores the
 * first wrong byte's stream offset in *bad. */
int nq_payload_verify(uint64_t offset, const uint8_t *data, size_t len, uint64_t *bad);

#endif
