//go:build !nesquic_nostats

package main

import (
	"time"

	"github.com/quic-go/quic-go"
)

// connStats: what the adapter reads of a connection's statistics.
type connStats struct {
	received                   uint64
	smoothedRTT, meanDeviation time.Duration
}

func statsOf(c quicConn) connStats {
	s := c.ConnectionStats()
	return connStats{received: s.PacketsReceived, smoothedRTT: s.SmoothedRTT, meanDeviation: s.MeanDeviation}
}

// trackStats: nothing to do, quic-go keeps the statistics itself (v0.55 and later).
func trackStats(*quic.Config) {}
