//go:build !nesquic_noqlog && !nesquic_qlog_schemas

package main

import (
	"io"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlogwriter"
)

// newConnectionFileSeq: quic-go v0.65 and later name no event schemas.
func newConnectionFileSeq(w io.WriteCloser, isClient bool) *qlogwriter.FileSeq {
	return qlogwriter.NewConnectionFileSeq(w, isClient, quic.ConnectionID{})
}
