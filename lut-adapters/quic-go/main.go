// nesquic-lut-quic-go: quic-go (Go crypto/tls, its own UDP path with GSO and recvmmsg)
// speaking Nesquic's benchmark protocol (docs/protocol.md). Started by `nesquic run --lut
// quic-go`; `server` and `client` take the same flags as every LUT executable.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

// gsoEnv is how quic-go lets a program switch its GSO off; it reads it when it wraps a socket.
const gsoEnv = "QUIC_GO_DISABLE_GSO"

type optList []string

func (o *optList) String() string     { return strings.Join(*o, ",") }
func (o *optList) Set(v string) error { *o = append(*o, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "nesquic-lut-quic-go: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "server" && args[0] != "client") {
		return errors.New("usage: nesquic-lut-quic-go server|client [flags] (docs/protocol.md)")
	}
	role := args[0]
	fs := flag.NewFlagSet(role, flag.ContinueOnError)
	var opts optList
	io := fs.String("io", "native", "I/O path (quic-go has only its own: native)")
	qlog := fs.String("qlog", "", "write quic-go's own qlog (JSON-SEQ) here")
	connections := fs.Int("connections", 1, "connections in total")
	streams := fs.Int("streams", 1, "streams per connection")
	fs.Var(&opts, "opt", "KEY=VALUE setting: "+supportedOptions)
	var listen, cert, key, connect, ca *string
	var size *uint64
	var parallel *int
	if role == "server" {
		listen = fs.String("listen", "", "address to bind")
		cert = fs.String("cert", "", "DER certificate")
		key = fs.String("key", "", "DER PKCS#8 key")
	} else {
		connect = fs.String("connect", "", "server address")
		ca = fs.String("ca", "", "DER certificate to trust")
		size = fs.Uint64("size", 0, "bytes to request per stream")
		parallel = fs.Int("parallel", 1, "connections open at once")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *io != "native" {
		return fmt.Errorf("--io %s: quic-go runs only on its own UDP path (--io native)", *io)
	}
	if *connections < 1 || *streams < 1 || (parallel != nil && *parallel < 1) {
		return errors.New("--connections, --streams and --parallel must be at least 1")
	}
	o, err := parseOptions(opts)
	if err != nil {
		return err
	}
	// Before quic-go wraps any socket: it reads the variable then.
	if o.gso != nil {
		if *o.gso {
			err = os.Unsetenv(gsoEnv)
		} else {
			err = os.Setenv(gsoEnv, "1")
		}
		if err != nil {
			return fmt.Errorf("set %s: %w", gsoEnv, err)
		}
	}
	if role == "server" {
		if *listen == "" || *cert == "" || *key == "" {
			return errors.New("server needs --listen, --cert and --key")
		}
		return runServer(serverArgs{listen: *listen, cert: *cert, key: *key, qlog: *qlog,
			connections: *connections, streams: *streams, opts: o})
	}
	if *connect == "" || *ca == "" {
		return errors.New("client needs --connect, --ca and --size")
	}
	return runClient(clientArgs{connect: *connect, ca: *ca, qlog: *qlog, size: *size,
		connections: *connections, parallel: *parallel, streams: *streams, opts: o})
}

// quicGoVersion is the quic-go module version linked into this build.
func quicGoVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/quic-go/quic-go" && d.Replace != nil {
				// Built against a checkout (build-from-source.sh): name it, not the version
				// go.mod asks for, which is not what was compiled in.
				return d.Version + " => " + d.Replace.Path
			}
			if d.Path == "github.com/quic-go/quic-go" {
				return d.Version
			}
		}
	}
	return "(unknown version)"
}
