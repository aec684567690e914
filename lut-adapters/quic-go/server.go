package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/quic-go/quic-go"
)

// corruptEnv is the test hook shared with the other LUTs: the server flips the payload byte at
// this offset (the client must report it).
const corruptEnv = "NESQUIC_FAULT_SERVER_CORRUPT_AT"

// closeGrace: once every stream was served, how long the client may stay silent (no packet
// received from it) before the server closes the connection itself. A live client that still
// misses data acknowledges the server's retransmissions; silence means it has closed and its
// CONNECTION_CLOSE was lost (or it is gone). A local timer, not the negotiated idle timeout, which
// would also cut a slow client short.
const closeGrace = 3 * time.Second

type serverArgs struct {
	listen, cert, key, qlog string
	connections, streams    int
	opts                    options
}

func runServer(a serverArgs) error {
	tlsConf, err := serverTLS(a.cert, a.key)
	if err != nil {
		return err
	}
	addr, err := net.ResolveUDPAddr("udp", a.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", a.listen, err)
	}
	udp, err := net.ListenUDP("udp", addr)
	if err != nil {
		return fmt.Errorf("bind %s: %w", a.listen, err)
	}
	conf := &quic.Config{MaxIncomingStreams: int64(max(100, a.streams))}
	var ql *qlogFile
	if a.qlog != "" {
		if ql, err = openQlog(a.qlog, false); err != nil {
			return fmt.Errorf("--qlog %s: %w", a.qlog, err)
		}
	}
	setTracer(conf, ql)
	tr := &quic.Transport{Conn: udp}
	ln, err := tr.Listen(tlsConf, conf)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if err := applyBuffers(udp, a.opts); err != nil {
		return err
	}
	emitListening(ln.Addr())

	var corruptAt int64 = -1
	if v := os.Getenv(corruptEnv); v != "" {
		if corruptAt, err = strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("%s=%q: %w", corruptEnv, v, err)
		}
	}
	results := make(chan error, a.connections)
	for i := range a.connections {
		conn, err := ln.Accept(context.Background())
		if err != nil {
			return fmt.Errorf("accept connection %d: %w", i, err)
		}
		go func() {
			if err := serveConnection(conn, a.streams, corruptAt); err != nil {
				results <- fmt.Errorf("connection %d: %w", i, err)
				return
			}
			results <- nil
		}()
	}
	for range a.connections {
		if err := <-results; err != nil {
			return err
		}
	}
	_ = ln.Close()
	_ = tr.Close()
	if ql != nil {
		ql.finish()
	}
	return nil
}

// closedByClient: the client ended the connection with code 0 (it verified everything).
func closedByClient(err error) bool {
	var app *quic.ApplicationError
	return errors.As(err, &app) && app.Remote && app.ErrorCode == 0
}

func serveConnection(conn quicConn, expected int, corruptAt int64) error {
	streams := make(chan error, expected)
	opened := 0
	for opened < expected {
		s, err := conn.AcceptStream(conn.Context())
		if err != nil {
			if closedByClient(context.Cause(conn.Context())) {
				break
			}
			return fmt.Errorf("accept stream (%d of %d opened): %w", opened, expected, err)
		}
		opened++
		go func() { streams <- serveStream(s, corruptAt) }()
	}
	for range opened {
		if err := <-streams; err != nil {
			if closedByClient(context.Cause(conn.Context())) {
				continue
			}
			return err
		}
	}
	awaitClose(conn)
	return nil
}

// awaitClose waits for the client's close, or closes with code 0 once the client has been
// silent for closeGrace (see closeGrace).
func awaitClose(conn quicConn) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	heard, silentSince := statsOf(conn).received, time.Now()
	for {
		select {
		case <-conn.Context().Done():
			return
		case now := <-tick.C:
			if r := statsOf(conn).received; r != heard {
				heard, silentSince = r, now
			} else if now.Sub(silentSince) >= closeGrace {
				_ = conn.CloseWithError(0, "served")
				return
			}
		}
	}
}

func serveStream(s quicStream, corruptAt int64) error {
	request, err := io.ReadAll(io.LimitReader(s, requestLen+1))
	if err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	if len(request) != requestLen {
		return fmt.Errorf("request is %d bytes, expected %d", len(request), requestLen)
	}
	size := uint64(request[0])<<56 | uint64(request[1])<<48 | uint64(request[2])<<40 | uint64(request[3])<<32 |
		uint64(request[4])<<24 | uint64(request[5])<<16 | uint64(request[6])<<8 | uint64(request[7])
	for offset := uint64(0); offset < size; {
		chunk := window(offset, int(min(size-offset, windowLen)))
		if at := uint64(corruptAt); corruptAt >= 0 && at >= offset && at < offset+uint64(len(chunk)) {
			chunk = append([]byte{}, chunk...)
			chunk[at-offset] ^= 0xff
		}
		// quic-go keeps the slice until it has packed it into packets: no copy of ours.
		if _, err := s.Write(chunk); err != nil {
			return fmt.Errorf("write payload at offset %d: %w", offset, err)
		}
		offset += uint64(len(chunk))
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("finish stream: %w", err)
	}
	return nil
}
