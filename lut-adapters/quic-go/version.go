package main

// What differs between quic-go versions is chosen at build time by build tags, which
// build-from-source.sh selects from the API the checkout has (never from its version number,
// which a checkout between tags or a module download without .git does not state):
//
//	nesquic_connif        quic-go before v0.53: connections and streams are interfaces
//	                      (quic.Connection, quic.Stream), not *quic.Conn and *quic.Stream
//	nesquic_nostats       before v0.55: no Conn.ConnectionStats; a logging.ConnectionTracer
//	                      counts received packets and keeps the RTT instead
//	nesquic_noqlog        before v0.56: no qlogwriter package; --qlog is turned off with a note
//	nesquic_qlog_schemas  qlogwriter.NewConnectionFileSeq takes the event schemas (v0.56-v0.64
//	                      and upstream's main as of 2026-08); without: v0.65's form
//
// No tag at all is the version go.mod pins (build.sh). The oldest quic-go supported is v0.43
// (April 2024): before it there is no quic.ConnectionTracingID for the nesquic_nostats tracer, and
// build-from-source.sh refuses such a checkout by name.

// versionNotes: what this build of the adapter turned off because its quic-go lacks it, for the
// io report line (and stderr where it matters).
var versionNotes []string
