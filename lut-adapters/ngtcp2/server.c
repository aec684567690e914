/* The server: one UDP socket, connections told apart by the client's address (each client
 * connection has its own socket and migration is disabled), each stream answering its 8-byte
 * request with that many pattern bytes; exits once `connections` connections have ended. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

struct server {
  const struct nq_args *a;
  int fd;
  struct sockaddr_storage local;
  socklen_t locallen;
  gnutls_certificate_credentials_t cred;
  struct nq_conn *conns; /* a->connections of them */
  int accepted, ended;
  int failed;
};

static struct nq_stream *stream_open(struct nq_conn *c, int64_t id) {
  for (int k = 0; k < c->opened; k++)
    if (c->streams[k].id == id) return &c->streams[k];
  if (c->opened == c->nstreams) {
    snprintf(c->error, sizeof c->error, "the client opened more than the %d streams expected", c->nstreams);
    return NULL;
  }
  struct nq_stream *s = &c->streams[c->opened++];
  memset(s, 0, sizeof *s);
  s->id = id;
  return s;
}

static int stream_data(struct nq_conn *c, struct nq_stream *s, uint32_t flags, uint64_t offset, const uint8_t *data,
                       size_t len) {
  if (offset + len > NQ_REQUEST_LEN) {
    snprintf(c->error, sizeof c->error, "request on stream %lld is longer than %d bytes", (long long)s->id, NQ_REQUEST_LEN);
    return -1;
  }
  memcpy(s->request + offset, data, len);
  s->received += len;
  if (flags & NGTCP2_STREAM_DATA_FLAG_FIN) {
    if (s->received != NQ_REQUEST_LEN) {
      snprintf(c->error, sizeof c->error, "request is %llu bytes, expected %d", (unsigned long long)s->received, NQ_REQUEST_LEN);
      return -1;
    }
    uint64_t size = 0;
    for (int i = 0; i < NQ_REQUEST_LEN; i++) size = size << 8 | s->request[i];
    s->send_total = size;
    s->done = 1; /* an empty response still sends its FIN */
  }
  return 0;
}

static void handshake(struct nq_conn *c) { (void)c; }

static const struct nq_role ROLE = {stream_open, stream_data, handshake};

static struct nq_conn *find(struct server *sv, const struct sockaddr_storage *from, socklen_t len) {
  for (int i = 0; i < sv->accepted; i++)
    if (sv->conns[i].remotelen == len && memcmp(&sv->conns[i].remote, from, len) == 0) return &sv->conns[i];
  return NULL;
}

static struct nq_conn *accept_conn(struct server *sv, const uint8_t *pkt, size_t len, const struct sockaddr_storage *from,
                                   socklen_t fromlen) {
  ngtcp2_pkt_hd hd;
  if (sv->accepted == sv->a->connections || ngtcp2_accept(&hd, pkt, len) != 0) return NULL;
  struct nq_conn *c = &sv->conns[sv->accepted];
  memset(c, 0, sizeof *c);
  c->args = sv->a;
  c->role = &ROLE;
  c->fd = sv->fd;
  c->local = sv->local;
  c->locallen = sv->locallen;
  memcpy(&c->remote, from, fromlen);
  c->remotelen = fromlen;
  c->nstreams = sv->a->streams;
  c->streams = calloc((size_t)c->nstreams, sizeof *c->streams);
  if (!c->streams) nq_die("out of memory");
  ngtcp2_settings settings;
  ngtcp2_transport_params params;
  nq_settings(&settings, &params, &sv->a->opt, 1);
  if (sv->a->qlog) nq_qlog_open(&c->qlog, &settings, sv->a->qlog, sv->accepted);
  nq_params_original_dcid(&params, &hd.dcid);
  ngtcp2_cid scid;
  scid.datalen = NGTCP2_MAX_CIDLEN;
  nq_random(scid.data, scid.datalen);
  ngtcp2_callbacks cb;
  nq_callbacks(&cb, 1);
  ngtcp2_path path = {{(struct sockaddr *)&c->local, c->locallen}, {(struct sockaddr *)&c->remote, c->remotelen}, NULL};
  int rv = ngtcp2_conn_server_new(&c->conn, &hd.scid, &scid, &path, hd.version, &cb, &settings, &params, NULL, c);
  if (rv != 0) nq_die("ngtcp2_conn_server_new: %s", ngtcp2_strerror(rv));
  nq_tls_session(c, sv->cred);
  ngtcp2_conn_set_tls_native_handle(c->conn, c->tls);
  sv->accepted++;
  return c;
}

static void receive(struct server *sv) {
  static uint8_t pkt[65536];
  for (;;) {
    struct sockaddr_storage from;
    socklen_t fromlen;
    size_t segment, n = nq_udp_recv(sv->fd, pkt, sizeof pkt, &segment, &from, &fromlen);
    if (n == 0) return;
    struct nq_conn *c = find(sv, &from, fromlen);
    /* GRO hands over several datagrams of one sender at once: each is one QUIC datagram. */
    for (size_t at = 0; at < n; at += segment) {
      size_t len = n - at < segment ? n - at : segment;
      if (!c) c = accept_conn(sv, pkt + at, len, &from, fromlen);
      if (c) nq_conn_read(c, pkt + at, len);
    }
    if (c) nq_conn_write(c);
  }
}

int nq_run_server(const struct nq_args *a) {
  struct server sv = {.a = a};
  const char *corrupt = getenv("NESQUIC_FAULT_SERVER_CORRUPT_AT");
  if (corrupt && *corrupt) {
    char *end;
    nq_corrupt_at = strtoll(corrupt, &end, 10);
    if (*end || nq_corrupt_at < 0) nq_die("NESQUIC_FAULT_SERVER_CORRUPT_AT=%s is not a byte offset", corrupt);
  }
  sv.cred = nq_tls_credentials(a);
  nq_parse_addr(a->listen, &sv.local, &sv.locallen);
  sv.fd = nq_udp_open((struct sockaddr *)&sv.local, sv.locallen, &a->opt, 1);
  sv.locallen = sizeof sv.local;
  getsockname(sv.fd, (struct sockaddr *)&sv.local, &sv.locallen);
  char addr[80];
  nq_format_addr((struct sockaddr *)&sv.local, addr, sizeof addr);
  nq_emit("{\"event\":\"listening\",\"addr\":\"%s\"}", addr);
  sv.conns = calloc((size_t)a->connections, sizeof *sv.conns);
  if (!sv.conns) nq_die("out of memory");
  while (sv.ended < a->connections) {
    /* Sleep until the socket is readable or the earliest connection timer expires. */
    uint64_t now = nq_now(), next = now + NGTCP2_SECONDS;
    for (int i = 0; i < sv.accepted; i++)
      if (!sv.conns[i].closed) {
        uint64_t e = ngtcp2_conn_get_expiry(sv.conns[i].conn);
        if (e < next) next = e;
      }
    struct pollfd p = {sv.fd, POLLIN, 0};
    int wait_ms = next > now ? (int)((next - now + 999999) / 1000000) : 0;
    if (poll(&p, 1, wait_ms) < 0 && errno != EINTR) nq_die("poll: %s", strerror(errno));
    if (p.revents & POLLIN) receive(&sv);
    sv.ended = 0;
    for (int i = 0; i < sv.accepted; i++) {
      struct nq_conn *c = &sv.conns[i];
      nq_conn_timer(c);
      if (c->closed && c->error[0] && !sv.failed) {
        fprintf(stderr, NQ_PROG ": server: connection %d: %s\n", i, c->error);
        sv.failed = 1;
      }
      sv.ended += c->closed;
    }
  }
  for (int i = 0; i < sv.accepted; i++) nq_conn_free(&sv.conns[i]);
  return sv.failed;
}
