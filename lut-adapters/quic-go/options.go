package main

// `--opt KEY=VALUE` settings (nesquic's `--lut-opt`), checked here too so direct use of the
// executable gets the same refusals as `nesquic run`.

import (
	"fmt"
	"strconv"
	"strings"
)

type options struct {
	gso    *bool // nil: quic-go's default (on where the kernel has UDP_SEGMENT)
	rcvbuf int   // 0: quic-go's own (it raises SO_RCVBUF to 7 MiB)
	sndbuf int
}

const supportedOptions = "gso=on|off, rcvbuf=BYTES, sndbuf=BYTES, cc=cubic"

func parseOptions(list []string) (options, error) {
	var o options
	for _, opt := range list {
		key, value, _ := strings.Cut(opt, "=")
		switch key {
		case "gso":
			switch value {
			case "on", "off":
				on := value == "on"
				o.gso = &on
			default:
				return o, fmt.Errorf("option %q: gso takes on or off", opt)
			}
		case "rcvbuf", "sndbuf":
			n, err := strconv.Atoi(value)
			if err != nil || n <= 0 {
				return o, fmt.Errorf("option %q: a byte count above 0 expected", opt)
			}
			if key == "rcvbuf" {
				o.rcvbuf = n
			} else {
				o.sndbuf = n
			}
		case "cc":
			// quic-go's congestion controller is not configurable: Cubic is all it runs.
			if value != "cubic" {
				return o, fmt.Errorf("option %q: quic-go runs only its Cubic congestion controller (no API chooses another)", opt)
			}
		case "cipher":
			return o, fmt.Errorf("option %q: quic-go cannot choose the TLS 1.3 cipher suite (Go's crypto/tls does not let a program configure TLS 1.3 suites)", opt)
		default:
			return o, fmt.Errorf("unknown option %q; supported: %s", opt, supportedOptions)
		}
	}
	return o, nil
}
