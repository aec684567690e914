//go:build nesquic_connif

package main

import "github.com/quic-go/quic-go"

// quicConn and quicStream are a connection and a stream as this quic-go hands them out
// (before v0.53: interfaces).
type (
	quicConn   = quic.Connection
	quicStream = quic.Stream
)
