//go:build !nesquic_noqlog

package main

// `--qlog PATH`: quic-go's own qlog (JSON-SEQ, qlog 0.3 header, draft event names such as
// transport:packet_sent), one file for every connection of the process. The `qlog` report line
// gives the wall-clock time of the file's time zero, read from the header quic-go writes.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlogwriter"
)

type qlogFile struct {
	trace  *qlogwriter.FileSeq
	keeper qlogwriter.Recorder // held open so the file outlives each connection's producer
	closed chan struct{}
}

// headerCapture passes writes through to the file and keeps the first one: quic-go writes the
// whole header record in one call when the trace is created.
type headerCapture struct {
	w      *bufio.Writer
	f      *os.File
	header []byte
	closed chan struct{}
	once   sync.Once
}

func (h *headerCapture) Write(p []byte) (int, error) {
	if h.header == nil {
		h.header = append([]byte{}, p...)
	}
	return h.w.Write(p)
}

func (h *headerCapture) Close() error {
	err := h.w.Flush()
	if cerr := h.f.Close(); err == nil {
		err = cerr
	}
	h.once.Do(func() { close(h.closed) })
	return err
}

func openQlog(path string, isClient bool) (*qlogFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	capture := &headerCapture{w: bufio.NewWriter(f), f: f, closed: make(chan struct{})}
	trace := newConnectionFileSeq(capture, isClient)
	var header struct {
		Trace struct {
			CommonFields struct {
				ReferenceTime struct {
					WallClockTime string `json:"wall_clock_time"`
				} `json:"reference_time"`
			} `json:"common_fields"`
		} `json:"trace"`
	}
	if err := json.Unmarshal(bytes.Trim(capture.header, "\x1e\n"), &header); err != nil {
		return nil, fmt.Errorf("quic-go's qlog header: %w", err)
	}
	start, err := time.Parse(time.RFC3339Nano, header.Trace.CommonFields.ReferenceTime.WallClockTime)
	if err != nil {
		return nil, fmt.Errorf("quic-go's qlog reference time: %w", err)
	}
	go trace.Run()
	emit(qlogEvent{Event: "qlog", Path: path, StartUnixNs: uint64(start.UnixNano())})
	return &qlogFile{trace: trace, keeper: trace.AddProducer(), closed: capture.closed}, nil
}

// setTracer makes every connection of conf record into ql (none: no --qlog).
func setTracer(conf *quic.Config, ql *qlogFile) {
	trackStats(conf)
	if ql != nil {
		conf.Tracer = ql.tracer
	}
}

// tracer is quic.Config.Tracer: every connection records into the one file.
func (q *qlogFile) tracer(context.Context, bool, quic.ConnectionID) qlogwriter.Trace {
	return q.trace
}

// finish closes our producer and waits (briefly) until the connections' producers are closed
// too and the file is flushed.
func (q *qlogFile) finish() {
	_ = q.keeper.Close()
	select {
	case <-q.closed:
	case <-time.After(2 * time.Second):
		fmt.Fprintln(os.Stderr, "nesquic-lut-quic-go: warning: the qlog file was not closed within 2 s (a connection still records)")
	}
}
