//go:build nesquic_noqlog

package main

import (
	"fmt"
	"os"

	"github.com/quic-go/quic-go"
)

// qlogMissing: why --qlog is off in this build.
const qlogMissing = "qlog off: this quic-go has no qlogwriter package (added in v0.56; the adapter does not drive the older qlog API)"

func init() { versionNotes = append(versionNotes, qlogMissing) }

// qlogFile: none in this build.
type qlogFile struct{}

// openQlog says --qlog is off and why; the transfer runs without it.
func openQlog(path string, _ bool) (*qlogFile, error) {
	fmt.Fprintf(os.Stderr, "nesquic-lut-quic-go: note: --qlog %s ignored: %s\n", path, qlogMissing)
	return nil, nil
}

func (*qlogFile) finish() {}

// setTracer: only the statistics, where this quic-go needs a tracer for them.
func setTracer(conf *quic.Config, _ *qlogFile) { trackStats(conf) }
