package main

// The UDP socket handed to quic-go (a quic.Transport over our own net.UDPConn), the
// rcvbuf/sndbuf options, and the `io` report line.

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/quic-go/quic-go"
	"golang.org/x/sys/unix"
)

// quic-go (every version from v0.48 to v0.66) packs a GSO batch into one 20 KiB buffer (internal/protocol.MaxLargePacketBufferSize),
// so a send carries at most that over the smallest QUIC packet (1200 bytes) datagrams.
const gsoBatchBytes, minQUICPacket = 20 * 1024, 1200

// recvBatch is quic-go's recvmmsg batch on Linux (sys_conn_helper_linux.go batchSize).
const recvBatch = 8

// initTransport makes quic-go wrap the socket now (it raises SO_RCVBUF/SO_SNDBUF to 7 MiB
// then), so our own buffer options, applied afterwards, are the ones that hold. A server's
// Listen does that; a client has no such call before its first Dial, and ReadNonQUICPacket
// with a cancelled context is the public method that initialises the transport and returns at
// once (its side effect, queueing non-QUIC datagrams for us, never triggers: none arrive).
func initTransport(tr *quic.Transport) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, _ = tr.ReadNonQUICPacket(ctx, nil)
}

// applyBuffers sets the requested socket buffers (SO_*BUFFORCE as root, so the kernel grants
// exactly twice the request) and reports the socket's effective settings.
func applyBuffers(udp *net.UDPConn, o options) error {
	raw, err := udp.SyscallConn()
	if err != nil {
		return err
	}
	set := func(force, plain, n int) error {
		if n == 0 {
			return nil
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, force, n); serr != nil {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, plain, n)
			}
		}); err != nil {
			return err
		}
		return serr
	}
	if err := set(unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, o.rcvbuf); err != nil {
		return fmt.Errorf("rcvbuf=%d: %w", o.rcvbuf, err)
	}
	if err := set(unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, o.sndbuf); err != nil {
		return fmt.Errorf("sndbuf=%d: %w", o.sndbuf, err)
	}
	var rcv, snd, gsoErr, getErr error
	var rcvN, sndN int
	if err := raw.Control(func(fd uintptr) {
		rcvN, rcv = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		sndN, snd = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
		// quic-go's own GSO probe (isGSOEnabled): the kernel knows UDP_SEGMENT on this socket.
		_, gsoErr = unix.GetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT)
	}); err != nil {
		getErr = err
	}
	for _, e := range []error{getErr, rcv, snd} {
		if e != nil {
			return fmt.Errorf("read socket buffers: %w", e)
		}
	}
	gso := uint64(1)
	disabled, _ := strconv.ParseBool(os.Getenv(gsoEnv))
	if gsoErr == nil && !disabled {
		gso = gsoBatchBytes / minQUICPacket
	}
	stack := "quic-go " + quicGoVersion() + " (its own UDP path: sendmsg, GSO by UDP_SEGMENT where enabled; recvmmsg of 8; no GRO)"
	for _, note := range versionNotes {
		stack += "; " + note
	}
	emit(ioEvent{
		Event:          "io",
		Stack:          stack,
		GsoMaxSegments: gso,
		GroSegments:    1,
		SendMmsg:       false,
		RecvMmsg:       recvBatch > 1,
		RecvBuffer:     uint64(rcvN),
		SendBuffer:     uint64(sndN),
	})
	return nil
}
