package main

// Report lines (docs/protocol.md "Reporting"): one JSON object per line on stdout.

import (
	"encoding/json"
	"net"
	"os"
	"sync"
	"time"
)

var stdoutMu sync.Mutex

// emit writes one report line (os.Stdout is unbuffered: the orchestrator sees it at once).
func emit(v any) {
	line, err := json.Marshal(v)
	if err != nil {
		return // only plain structs are emitted; they always encode
	}
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	_, _ = os.Stdout.Write(append(line, '\n'))
}

type listeningEvent struct {
	Event string `json:"event"`
	Addr  string `json:"addr"`
}

func emitListening(addr net.Addr) { emit(listeningEvent{"listening", addr.String()}) }

type progressEvent struct {
	Event string `json:"event"`
	Bytes uint64 `json:"bytes"`
}

type streamResult struct {
	Bytes      uint64 `json:"bytes"`
	TransferNs uint64 `json:"transfer_ns"`
}

type connectionResult struct {
	StartNs     uint64         `json:"start_ns"`
	HandshakeNs uint64         `json:"handshake_ns"`
	TransferNs  uint64         `json:"transfer_ns"`
	Streams     []streamResult `json:"streams"`
	pto         time.Duration  // not reported: how long the client drains after closing
}

func (c connectionResult) bytes() uint64 {
	var n uint64
	for _, s := range c.Streams {
		n += s.Bytes
	}
	return n
}

type doneEvent struct {
	Event       string             `json:"event"`
	Bytes       uint64             `json:"bytes"`
	HandshakeNs uint64             `json:"handshake_ns"`
	TransferNs  uint64             `json:"transfer_ns"`
	ElapsedNs   uint64             `json:"elapsed_ns,omitempty"`
	Connections []connectionResult `json:"connections,omitempty"`
}

type ioEvent struct {
	Event          string `json:"event"`
	Stack          string `json:"stack"`
	GsoMaxSegments uint64 `json:"gso_max_segments"`
	GroSegments    uint64 `json:"gro_segments"`
	SendMmsg       bool   `json:"send_mmsg"`
	RecvMmsg       bool   `json:"recv_mmsg"`
	RecvBuffer     uint64 `json:"recv_buffer"`
	SendBuffer     uint64 `json:"send_buffer"`
}

type qlogEvent struct {
	Event       string `json:"event"`
	Path        string `json:"path"`
	StartUnixNs uint64 `json:"start_unix_ns"`
}
