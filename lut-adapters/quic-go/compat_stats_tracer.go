//go:build nesquic_nostats

package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/logging"
)

// connStats: what the adapter reads of a connection's statistics.
type connStats struct {
	received                   uint64
	smoothedRTT, meanDeviation time.Duration
}

// Before v0.55 quic-go has no Conn.ConnectionStats: a connection tracer counts the packets
// received and keeps the RTT estimates, found again by the connection's tracing ID (its
// context carries it, as did the context the tracer was created with).
type tracked struct {
	received atomic.Uint64
	mu       sync.Mutex
	rtt, dev time.Duration
}

var trackedConns sync.Map // quic.ConnectionTracingID -> *tracked

func trackStats(conf *quic.Config) {
	conf.Tracer = func(ctx context.Context, _ logging.Perspective, _ quic.ConnectionID) *logging.ConnectionTracer {
		id, ok := ctx.Value(quic.ConnectionTracingKey).(quic.ConnectionTracingID)
		if !ok {
			return nil
		}
		t := &tracked{}
		trackedConns.Store(id, t)
		return &logging.ConnectionTracer{
			ReceivedLongHeaderPacket: func(*logging.ExtendedHeader, logging.ByteCount, logging.ECN, []logging.Frame) {
				t.received.Add(1)
			},
			ReceivedShortHeaderPacket: func(*logging.ShortHeader, logging.ByteCount, logging.ECN, []logging.Frame) {
				t.received.Add(1)
			},
			UpdatedMetrics: func(r *logging.RTTStats, _, _ logging.ByteCount, _ int) {
				t.mu.Lock()
				t.rtt, t.dev = r.SmoothedRTT(), r.MeanDeviation()
				t.mu.Unlock()
			},
		}
	}
}

func statsOf(c quicConn) connStats {
	id, _ := c.Context().Value(quic.ConnectionTracingKey).(quic.ConnectionTracingID)
	v, ok := trackedConns.Load(id)
	if !ok {
		return connStats{}
	}
	t := v.(*tracked)
	t.mu.Lock()
	defer t.mu.Unlock()
	return connStats{received: t.received.Load(), smoothedRTT: t.rtt, meanDeviation: t.dev}
}
