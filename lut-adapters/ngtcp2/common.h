/* What the server and client share: options, the clock, report lines, UDP sockets with GSO,
 * GnuTLS credentials and ngtcp2 settings. */
#ifndef NQ_COMMON_H
#define NQ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include "compat.h"

#include "payload.h"

#define NQ_PROG "nesquic-lut-ngtcp2"
/* A connection ends after this long without a packet (a lost CONNECTION_CLOSE does not keep
 * the server waiting). */
#define NQ_IDLE_TIMEOUT (5 * NGTCP2_SECONDS)
/* Largest GSO send: 64 KiB of UDP payload, at most 64 segments (the kernel's UDP_MAX_SEGMENTS). */
#define NQ_GSO_BYTES 65527u
#define NQ_GSO_SEGMENTS 64u

struct nq_options {
  int gso;                   /* 1: sendmsg with UDP_SEGMENT (default) */
  int gro;                   /* 1: UDP_GRO, several datagrams per recvmsg (default) */
  int rcvbuf, sndbuf;        /* 0: the kernel's default */
  ngtcp2_cc_algo cc;         /* default Cubic */
  const char *cipher;        /* GnuTLS name of the one TLS 1.3 AEAD offered, or NULL: all */
};

struct nq_args {
  int server;
  const char *listen, *cert, *key, *connect, *ca, *qlog;
  uint64_t size;
  int connections, parallel, streams;
  struct nq_options opt;
};

/* Fatal error: message to stderr, exit 1. */
void nq_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* Monotonic nanoseconds (ngtcp2's clock too). */
uint64_t nq_now(void);
/* One report line on stdout (printf format, without the newline), flushed. */
void nq_emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "host:port" or "[v6]:port" -> address. */
void nq_parse_addr(const char *text, struct sockaddr_storage *ss, socklen_t *len);
void nq_format_addr(const struct sockaddr *sa, char *out, size_t outlen);
/* A non-blocking UDP socket bound to `bind`, buffers and GSO applied; reports the `io` line when
 * `report`. */
int nq_udp_open(const struct sockaddr *bind, socklen_t len, const struct nq_options *o, int report);
/* Sends `len` bytes as datagrams of `segment` bytes (the last may be shorter): one sendmsg with
 * UDP_SEGMENT when there are several. Returns 0, or -1 when the socket is full (dropped: QUIC
 * recovers). */
int nq_udp_send(int fd, const struct sockaddr *to, socklen_t tolen, const uint8_t *data, size_t len, size_t segment);

/* Receives into `buf` (64 KiB): returns the bytes read (0: nothing waiting) and sets *segment to
 * the datagram size they are made of (UDP_GRO; the last may be shorter) and *from to the sender. */
size_t nq_udp_recv(int fd, uint8_t *buf, size_t cap, size_t *segment, struct sockaddr_storage *from, socklen_t *fromlen);

/* ngtcp2's settings and transport parameters for this run. */
void nq_settings(ngtcp2_settings *s, ngtcp2_transport_params *p, const struct nq_options *o, int server);
/* The GnuTLS priority string (TLS 1.3 only; one AEAD if --opt cipher). */
const char *nq_priority(const struct nq_options *o);
/* Reads a whole file (the DER certificate, key, trust anchor). */
gnutls_datum_t nq_read_file(const char *path, const char *what);
/* Random bytes (connection IDs, tokens). */
void nq_random(uint8_t *out, size_t len);
/* ngtcp2_rand and ngtcp2_get_new_connection_id callbacks. */
void nq_rand_cb(uint8_t *dest, size_t destlen, const ngtcp2_rand_ctx *ctx);
int nq_new_cid_cb(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t cidlen, void *user_data);

/* --qlog: one JSON-SEQ file per connection (ngtcp2 traces connection by connection): the first
 * connection's at PATH, the others at PATH-N; each announced by a `qlog` report line. ngtcp2
 * hands its qlog callback the connection's user data, so that must start with this struct. */
struct nq_qlog {
  FILE *f;
};
void nq_qlog_open(struct nq_qlog *q, ngtcp2_settings *s, const char *path, int index);
void nq_qlog_close(struct nq_qlog *q);

/* One stream: what it still has to send (the client's request, or the server's response from
 * the pattern) and, on the client, what it has received. */
struct nq_stream {
  int64_t id;
  const uint8_t *fixed; /* data to send instead of the pattern (the request), or NULL */
  uint64_t send_total;  /* bytes to send */
  uint64_t sent;        /* bytes ngtcp2 took */
  int fin_sent, blocked;
  uint8_t request[NQ_REQUEST_LEN];
  uint64_t received, expected; /* bytes received; bytes asked for (client) */
  int done;                    /* every byte received and verified (client), or request read (server) */
  uint64_t done_ns;
};

/* One QUIC connection over one UDP socket. */
struct nq_conn {
  struct nq_qlog qlog; /* first: see nq_qlog */
  ngtcp2_conn *conn;
  gnutls_session_t tls;
  ngtcp2_crypto_conn_ref ref;
  int fd;
  struct sockaddr_storage local, remote;
  socklen_t locallen, remotelen;
  struct nq_stream *streams;
  int nstreams, opened, rr;
  int closed;       /* no more packets: closed, draining or failed */
  char error[256];  /* why it failed, if it did */
  uint64_t start_ns, handshake_ns;
  const struct nq_args *args;
  const struct nq_role *role;
};

/* Crypto and TLS: GnuTLS credentials and a session for `c`. */
gnutls_certificate_credentials_t nq_tls_credentials(const struct nq_args *a);
void nq_tls_session(struct nq_conn *c, gnutls_certificate_credentials_t cred);
/* Callbacks both roles install (crypto helpers from ngtcp2_crypto, stream data, ids). */
void nq_callbacks(ngtcp2_callbacks *cb, int server);
/* Feeds one datagram to the connection. */
void nq_conn_read(struct nq_conn *c, const uint8_t *pkt, size_t len);
/* Writes what the connection has to send (stream data round-robin over its streams, GSO). */
void nq_conn_write(struct nq_conn *c);
/* Runs expired timers, then writes. */
void nq_conn_timer(struct nq_conn *c);
/* Sends a CONNECTION_CLOSE with application error 0 and marks the connection closed. */
void nq_conn_close(struct nq_conn *c);
void nq_conn_free(struct nq_conn *c);
/* The server's corrupt-at offset (NESQUIC_FAULT_SERVER_CORRUPT_AT), -1 if none. */
extern int64_t nq_corrupt_at;

/* What a role does when the shared callbacks fire. */
struct nq_role {
  struct nq_stream *(*stream_open)(struct nq_conn *c, int64_t id);
  int (*stream_data)(struct nq_conn *c, struct nq_stream *s, uint32_t flags, uint64_t offset, const uint8_t *data, size_t len);
  void (*handshake)(struct nq_conn *c);
};

int nq_run_server(const struct nq_args *a);
int nq_run_client(const struct nq_args *a);

#endif
