//go:build !nesquic_connif

package main

import "github.com/quic-go/quic-go"

// quicConn and quicStream are a connection and a stream as this quic-go hands them out
// (v0.53 and later: pointers to structs).
type (
	quicConn   = *quic.Conn
	quicStream = *quic.Stream
)
