package main

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

const progressEvery = 100 * time.Millisecond

// readBuf is the client's read size (the verifier compares it a pattern period at a time).
const readBuf = 64 * 1024

type clientArgs struct {
	connect, ca, qlog              string
	size                           uint64
	connections, parallel, streams int
	opts                           options
}

func (a clientArgs) single() bool { return a.connections == 1 && a.streams == 1 }

func runClient(a clientArgs) error {
	tlsConf, err := clientTLS(a.ca)
	if err != nil {
		return err
	}
	server, err := net.ResolveUDPAddr("udp", a.connect)
	if err != nil {
		return fmt.Errorf("--connect %s: %w", a.connect, err)
	}
	local := &net.UDPAddr{IP: net.IPv4zero}
	if server.IP.To4() == nil {
		local = &net.UDPAddr{IP: net.IPv6unspecified}
	}
	udp, err := net.ListenUDP("udp", local)
	if err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	conf := &quic.Config{}
	var ql *qlogFile
	if a.qlog != "" {
		if ql, err = openQlog(a.qlog, true); err != nil {
			return fmt.Errorf("--qlog %s: %w", a.qlog, err)
		}
	}
	setTracer(conf, ql)
	tr := &quic.Transport{Conn: udp}
	initTransport(tr)
	if err := applyBuffers(udp, a.opts); err != nil {
		return err
	}

	var verified atomic.Uint64
	stopProgress := make(chan struct{})
	go func() {
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-tick.C:
				emit(progressEvent{"progress", verified.Load()})
			}
		}
	}()

	first := time.Now()
	type outcome struct {
		index int
		res   connectionResult
		err   error
	}
	slots := make(chan struct{}, max(1, a.parallel))
	done := make(chan outcome, a.connections)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range a.connections {
		select {
		case slots <- struct{}{}:
		case o := <-done: // a failure ends the run now, not after the rest were started
			if o.err != nil {
				return o.err
			}
			done <- o
			slots <- struct{}{}
		}
		go func() {
			res, err := oneConnection(ctx, tr, server, tlsConf, conf, a, first, &verified)
			<-slots
			if err != nil {
				err = fmt.Errorf("connection %d: %w", i, err)
			}
			done <- outcome{i, res, err}
		}()
	}
	results := make([]connectionResult, a.connections)
	for range a.connections {
		o := <-done
		if o.err != nil {
			return o.err
		}
		results[o.index] = o.res
	}
	elapsed := time.Since(first)
	close(stopProgress)
	if a.single() {
		c := results[0]
		emit(doneEvent{Event: "done", Bytes: c.bytes(), HandshakeNs: c.HandshakeNs, TransferNs: c.TransferNs})
	} else {
		emit(summarise(results, uint64(elapsed.Nanoseconds())))
	}
	// Like quinn's wait_idle: the transport answers the server's late packets with the
	// CONNECTION_CLOSE again (quic-go keeps closed connections for 3 PTO), so a lost close costs
	// the server a retransmission, not its silence timer.
	time.Sleep(drain(results))
	_ = tr.Close()
	if ql != nil {
		ql.finish()
	}
	return nil
}

// pto is RFC 9002's probe timeout from a connection's RTT estimates (max_ack_delay: the
// default 25 ms quic-go advertises).
func pto(s connStats) time.Duration {
	return s.smoothedRTT + max(4*s.meanDeviation, time.Millisecond) + 25*time.Millisecond
}

// drain is how long quic-go keeps the last closed connection answering: 3 PTO.
func drain(conns []connectionResult) time.Duration {
	var longest time.Duration
	for _, c := range conns {
		longest = max(longest, c.pto)
	}
	return 3 * longest
}

// summarise is the multi-connection `done` line (docs/protocol.md): total bytes, the median
// connection's handshake (nearest rank, lower middle), first request to last byte verified.
func summarise(conns []connectionResult, elapsedNs uint64) doneEvent {
	d := doneEvent{Event: "done", ElapsedNs: elapsedNs, Connections: conns}
	handshakes := make([]uint64, 0, len(conns))
	var firstReq, lastByte uint64 = ^uint64(0), 0
	for _, c := range conns {
		d.Bytes += c.bytes()
		handshakes = append(handshakes, c.HandshakeNs)
		firstReq = min(firstReq, c.StartNs+c.HandshakeNs)
		lastByte = max(lastByte, c.StartNs+c.HandshakeNs+c.TransferNs)
	}
	slices.Sort(handshakes)
	if len(handshakes) > 0 {
		d.HandshakeNs = handshakes[(len(handshakes)-1)/2]
		d.TransferNs = lastByte - firstReq
	}
	return d
}

// oneConnection: handshake, `streams` concurrent requests each verified, then a close with code 0.
func oneConnection(ctx context.Context, tr *quic.Transport, server net.Addr, tlsConf *tls.Config, conf *quic.Config,
	a clientArgs, first time.Time, verified *atomic.Uint64) (connectionResult, error) {
	start := time.Now()
	conn, err := tr.Dial(ctx, server, tlsConf, conf)
	if err != nil {
		return connectionResult{}, fmt.Errorf("handshake: %w", err)
	}
	handshake := time.Since(start)
	requests := time.Now()
	type streamOutcome struct {
		index int
		res   streamResult
		err   error
	}
	done := make(chan streamOutcome, a.streams)
	for i := range a.streams {
		go func() {
			res, err := oneStream(ctx, conn, a.size, verified)
			if err != nil {
				err = fmt.Errorf("stream %d: %w", i, err)
			}
			done <- streamOutcome{i, res, err}
		}()
	}
	streams := make([]streamResult, a.streams)
	var failed error
	for range a.streams {
		o := <-done
		if o.err != nil && failed == nil {
			failed = o.err
		}
		streams[o.index] = o.res
	}
	if failed != nil {
		// No close: the client's exit is the verdict, and nesquic reports it (a server told first
		// would end with an error of its own and be reported instead).
		return connectionResult{}, failed
	}
	transfer := time.Since(requests)
	stats := statsOf(conn)
	_ = conn.CloseWithError(0, "done")
	return connectionResult{
		pto:         pto(stats),
		StartNs:     uint64(start.Sub(first).Nanoseconds()),
		HandshakeNs: uint64(handshake.Nanoseconds()),
		TransferNs:  uint64(transfer.Nanoseconds()),
		Streams:     streams,
	}, nil
}

func oneStream(ctx context.Context, conn quicConn, size uint64, verified *atomic.Uint64) (streamResult, error) {
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return streamResult{}, fmt.Errorf("open stream: %w", err)
	}
	sent := time.Now()
	var request [requestLen]byte
	binary.BigEndian.PutUint64(request[:], size)
	if _, err := s.Write(request[:]); err != nil {
		return streamResult{}, fmt.Errorf("send request: %w", err)
	}
	if err := s.Close(); err != nil {
		return streamResult{}, fmt.Errorf("finish request: %w", err)
	}
	var v verifier
	buf := make([]byte, readBuf)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if verr := v.update(buf[:n]); verr != nil {
				return streamResult{}, verr
			}
			verified.Add(uint64(n))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return streamResult{}, fmt.Errorf("read payload after %d bytes: %w", v.received, err)
		}
	}
	if err := v.finish(size); err != nil {
		return streamResult{}, err
	}
	return streamResult{Bytes: v.received, TransferNs: uint64(time.Since(sent).Nanoseconds())}, nil
}
