//go:build !nesquic_noqlog && nesquic_qlog_schemas

package main

import (
	"io"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// newConnectionFileSeq: quic-go v0.56-v0.64 (and upstream's main as of 2026-08) record only the
// events of the schemas the file declares: quic-go's own QUIC schema.
func newConnectionFileSeq(w io.WriteCloser, isClient bool) *qlogwriter.FileSeq {
	return qlogwriter.NewConnectionFileSeq(w, isClient, quic.ConnectionID{}, []string{qlog.EventSchema})
}
