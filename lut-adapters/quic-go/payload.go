package main

// The benchmark payload (docs/protocol.md): a pattern of PERIOD bytes, built once and repeated to
// a block of PERIOD + WINDOW bytes, so the window of up to WINDOW bytes at any stream offset is
// one contiguous slice. The server hands quic-go those slices; the client compares what it
// receives with bytes.Equal, a period at a time against one period of the block (it stays in L1).

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

const (
	// period is a prime: no packet, GSO segment or buffer size divides it.
	period = 4093
	// windowLen is the longest slice handed out at once.
	windowLen = 131071
	seed      = 0x6e65737175696321 // "nesquic!"
	// requestLen is the request: the payload size as a big-endian uint64.
	requestLen = 8
)

// block is the pattern repeated to period + windowLen bytes.
var block = buildBlock()

func splitmix64(n uint64) uint64 {
	z := (n + seed) * 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func buildBlock() []byte {
	b := make([]byte, period+windowLen)
	var word [8]byte
	for i := 0; i < period; i++ {
		if i%8 == 0 {
			binary.LittleEndian.PutUint64(word[:], splitmix64(uint64(i/8)))
		}
		b[i] = word[i%8]
	}
	for i := period; i < len(b); i++ {
		b[i] = b[i-period]
	}
	return b
}

// window is the payload from stream offset `offset` on: min(maxLen, windowLen) bytes of block.
func window(offset uint64, maxLen int) []byte {
	phase := int(offset % period)
	return block[phase : phase+min(maxLen, windowLen)]
}

// verifier checks a received stream chunk by chunk at memcmp speed.
type verifier struct {
	received uint64
	phase    int // received % period, kept up to date instead of divided per chunk
}

// update checks the next chunk, a period at a time against the same period of the block (the
// one at the chunk's phase); on a mismatch it reports the first wrong byte's offset.
func (v *verifier) update(chunk []byte) error {
	reference := block[v.phase : v.phase+period]
	last := 0
	for pos := 0; pos < len(chunk); pos += last {
		last = min(len(chunk)-pos, period)
		expected := reference[:last]
		got := chunk[pos : pos+last]
		if !bytes.Equal(got, expected) {
			i := 0
			for got[i] == expected[i] {
				i++
			}
			return fmt.Errorf("payload mismatch at byte offset %d", v.received+uint64(pos+i))
		}
	}
	v.received += uint64(len(chunk))
	// Every piece but the last was a whole period: only the last one moves the phase.
	v.phase += last
	if v.phase >= period {
		v.phase -= period
	}
	return nil
}

// finish is the length check.
func (v *verifier) finish(expected uint64) error {
	if v.received != expected {
		return fmt.Errorf("payload length %d != requested %d", v.received, expected)
	}
	return nil
}
