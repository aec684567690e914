/* The benchmark payload (docs/protocol.md): a pattern of PERIOD bytes repeated to a block of
 * PERIOD + WINDOW bytes, so the payload at any stream offset is one contiguous slice of up to
 * WINDOW bytes. The server hands ngtcp2 pointers into it (ngtcp2 keeps them until acknowledged:
 * no copy of ours); the client compares what arrives with memcmp, a period at a time against one
 * period of the block (that reference stays in L1). */
#ifndef NQ_PAYLOAD_H
#define NQ_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>

#define NQ_PERIOD 4093u   /* a prime: no packet, GSO segment or buffer size divides it */
#define NQ_WINDOW 131071u /* the longest slice handed out at once */
#define NQ_BLOCK (NQ_PERIOD + NQ_WINDOW)
#define NQ_REQUEST_LEN 8 /* the request: the payload size as a big-endian uint64 */

/* The pattern block (PERIOD + WINDOW bytes), built once by nq_payload_init. */
extern uint8_t nq_block[NQ_BLOCK];

void nq_payload_init(void);

/* Checks `len` received bytes at stream offset `offset`; on a mismatch returns 0 and stores the
 * first wrong byte's stream offset in *bad. */
int nq_payload_verify(uint64_t offset, const uint8_t *data, size_t len, uint64_t *bad);

#endif
