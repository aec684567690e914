package main

// The benchmark payload (docs/protocol.md): a block of PERIOD pattern bytes, built once and
// stored twice in a row so the window at any stream offset is one contiguous slice. The server
// hands quic-go those slices; the client compares what it receives with bytes.Equal.

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

const (
	// period is 2^17 - 1, a prime: no packet, GSO segment or buffer size divides it.
	period = 131071
	seed   = 0x6e65737175696321 // "nesquic!"
	// requestLen is the request: the payload size as a big-endian uint64.
	requestLen = 8
)

// block2 is the pattern twice in a row (2 * period bytes).
var block2 = buildBlock2()

func splitmix64(n uint64) uint64 {
	z := (n + seed) * 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func buildBlock2() []byte {
	b := make([]byte, 2*period)
	var word [8]byte
	for i := 0; i < period; i++ {
		if i%8 == 0 {
			binary.LittleEndian.PutUint64(word[:], splitmix64(uint64(i/8)))
		}
		b[i] = word[i%8]
	}
	copy(b[period:], b[:period])
	return b
}

// window is the payload from stream offset `offset` on: min(maxLen, period) bytes of block2.
func window(offset uint64, maxLen int) []byte {
	phase := int(offset % period)
	return block2[phase : phase+min(maxLen, period)]
}

// verifier checks a received stream chunk by chunk at memcmp speed.
type verifier struct {
	received uint64
	phase    int // received % period, kept up to date instead of divided per chunk
}

// update checks the next chunk; on a mismatch it reports the first wrong byte's offset.
func (v *verifier) update(chunk []byte) error {
	pos, phase := 0, v.phase
	for pos < len(chunk) {
		n := min(len(chunk)-pos, period)
		expected := block2[phase : phase+n]
		got := chunk[pos : pos+n]
		if !bytes.Equal(got, expected) {
			i := 0
			for got[i] == expected[i] {
				i++
			}
			return fmt.Errorf("payload mismatch at byte offset %d", v.received+uint64(pos+i))
		}
		pos += n
		phase += n
		if phase >= period {
			phase -= period
		}
	}
	v.received += uint64(len(chunk))
	v.phase = phase
	return nil
}

// finish is the length check.
func (v *verifier) finish(expected uint64) error {
	if v.received != expected {
		return fmt.Errorf("payload length %d != requested %d", v.received, expected)
	}
	return nil
}
