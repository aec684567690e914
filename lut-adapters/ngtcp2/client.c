/* The client: `connections` connections (each on its own UDP socket), `parallel` at a time,
 * each opening `streams` streams once the handshake is done; every byte verified; one `done`
 * line at the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define PROGRESS_EVERY (100 * NGTCP2_MILLISECONDS)

static uint64_t verified_total;

static struct nq_stream *stream_open(struct nq_conn *c, int64_t id) {
  for (int k = 0; k < c->opened; k++)
    if (c->streams[k].id == id) return &c->streams[k];
  snprintf(c->error, sizeof c->error, "the server opened stream %lld", (long long)id);
  return NULL;
}

static int stream_data(struct nq_conn *c, struct nq_stream *s, uint32_t flags, uint64_t offset, const uint8_t *data,
                       size_t len) {
  uint64_t bad;
  if (offset != s->received) {
    snprintf(c->error, sizeof c->error, "stream %lld: data at offset %llu, expected %llu", (long long)s->id,
             (unsigned long long)offset, (unsigned long long)s->received);
    return -1;
  }
  if (!nq_payload_verify(offset, data, len, &bad)) {
    snprintf(c->error, sizeof c->error, "payload mismatch at byte offset %llu", (unsigned long long)bad);
    return -1;
  }
  s->received += len;
  verified_total += len;
  if (s->received > s->expected) {
    snprintf(c->error, sizeof c->error, "stream carried more than the %llu bytes requested", (unsigned long long)s->expected);
    return -1;
  }
  if (flags & NGTCP2_STREAM_DATA_FLAG_FIN) {
    if (s->received < s->expected) {
      snprintf(c->error, sizeof c->error, "stream ended after %llu of %llu bytes", (unsigned long long)s->received,
               (unsigned long long)s->expected);
      return -1;
    }
    s->done = 1;
    s->done_ns = nq_now();
  }
  return 0;
}

/* Opens the streams the connection may open now (ngtcp2 refuses beyond the server's limit). */
static void open_streams(struct nq_conn *c) {
  while (c->opened < c->nstreams) {
    struct nq_stream *s = &c->streams[c->opened];
    if (ngtcp2_conn_open_bidi_stream(c->conn, &s->id, s) != 0) return;
    uint64_t size = c->args->size;
    for (int i = NQ_REQUEST_LEN - 1; i >= 0; i--, size >>= 8) s->request[i] = (uint8_t)size;
    s->fixed = s->request;
    s->send_total = NQ_REQUEST_LEN;
    s->expected = c->args->size;
    c->opened++;
  }
}

static void handshake(struct nq_conn *c) {
  c->handshake_ns = nq_now() - c->start_ns;
  open_streams(c);
}

static const struct nq_role ROLE = {stream_open, stream_data, handshake};

static void start(struct nq_conn *c, const struct nq_args *a, gnutls_certificate_credentials_t cred,
                  const struct sockaddr_storage *server, socklen_t serverlen, int index) {
  memset(c, 0, sizeof *c);
  c->args = a;
  c->role = &ROLE;
  c->remote = *server;
  c->remotelen = serverlen;
  struct sockaddr_storage any = {0};
  any.ss_family = server->ss_family;
  c->fd = nq_udp_open((struct sockaddr *)&any, server->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in),
                      &a->opt, index == 0);
  /* connect(): the kernel picks the local address the path needs, and only the server's
   * datagrams arrive. */
  if (connect(c->fd, (struct sockaddr *)server, serverlen) != 0) nq_die("connect: %s", strerror(errno));
  c->locallen = sizeof c->local;
  getsockname(c->fd, (struct sockaddr *)&c->local, &c->locallen);
  c->nstreams = a->streams;
  c->streams = calloc((size_t)c->nstreams, sizeof *c->streams);
  if (!c->streams) nq_die("out of memory");
  ngtcp2_settings settings;
  ngtcp2_transport_params params;
  nq_settings(&settings, &params, &a->opt, 0);
  if (a->qlog) nq_qlog_open(&c->qlog, &settings, a->qlog, index);
  ngtcp2_cid dcid, scid;
  dcid.datalen = NGTCP2_MAX_CIDLEN;
  nq_random(dcid.data, dcid.datalen);
  scid.datalen = 8;
  nq_random(scid.data, scid.datalen);
  ngtcp2_callbacks cb;
  nq_callbacks(&cb, 0);
  ngtcp2_path path = {{(struct sockaddr *)&c->local, c->locallen}, {(struct sockaddr *)&c->remote, c->remotelen}, NULL};
  c->start_ns = nq_now();
  int rv = ngtcp2_conn_client_new(&c->conn, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &cb, &settings, &params, NULL, c);
  if (rv != 0) nq_die("ngtcp2_conn_client_new: %s", ngtcp2_strerror(rv));
  nq_tls_session(c, cred);
  ngtcp2_conn_set_tls_native_handle(c->conn, c->tls);
  nq_conn_write(c);
}

static void receive(struct nq_conn *c) {
  static uint8_t pkt[65536];
  while (!c->closed) {
    struct sockaddr_storage from;
    socklen_t fromlen;
    size_t segment, n = nq_udp_recv(c->fd, pkt, sizeof pkt, &segment, &from, &fromlen);
    if (n == 0) break;
    /* GRO hands over several datagrams at once: each is one QUIC datagram. */
    for (size_t at = 0; at < n; at += segment) nq_conn_read(c, pkt + at, n - at < segment ? n - at : segment);
  }
  nq_conn_write(c);
}

static int all_done(const struct nq_conn *c) {
  if (c->opened < c->nstreams) return 0;
  for (int k = 0; k < c->nstreams; k++)
    if (!c->streams[k].done) return 0;
  return 1;
}

/* The `done` line: the protocol's short form for one connection with one stream. */
static void report(const struct nq_args *a, struct nq_conn *conns, uint64_t first, uint64_t elapsed) {
  if (a->connections == 1 && a->streams == 1) {
    struct nq_conn *c = &conns[0];
    uint64_t requests = c->start_ns + c->handshake_ns;
    nq_emit("{\"event\":\"done\",\"bytes\":%llu,\"handshake_ns\":%llu,\"transfer_ns\":%llu}",
            (unsigned long long)c->streams[0].received, (unsigned long long)c->handshake_ns,
            (unsigned long long)(c->streams[0].done_ns - requests));
    return;
  }
  uint64_t total = 0, first_request = UINT64_MAX, last_byte = 0;
  uint64_t *hs = calloc((size_t)a->connections, sizeof *hs);
  size_t cap = 256 + (size_t)a->connections * (96 + (size_t)a->streams * 48), len = 0;
  char *list = malloc(cap);
  if (!hs || !list) nq_die("out of memory");
  for (int i = 0; i < a->connections; i++) {
    struct nq_conn *c = &conns[i];
    uint64_t requests = c->start_ns + c->handshake_ns, end = requests;
    for (int k = 0; k < c->nstreams; k++)
      if (c->streams[k].done_ns > end) end = c->streams[k].done_ns;
    hs[i] = c->handshake_ns;
    if (requests < first_request) first_request = requests;
    if (end > last_byte) last_byte = end;
    len += (size_t)snprintf(list + len, cap - len, "%s{\"start_ns\":%llu,\"handshake_ns\":%llu,\"transfer_ns\":%llu,\"streams\":[",
                            i ? "," : "", (unsigned long long)(c->start_ns - first), (unsigned long long)c->handshake_ns,
                            (unsigned long long)(end - requests));
    for (int k = 0; k < c->nstreams; k++) {
      total += c->streams[k].received;
      len += (size_t)snprintf(list + len, cap - len, "%s{\"bytes\":%llu,\"transfer_ns\":%llu}", k ? "," : "",
                              (unsigned long long)c->streams[k].received, (unsigned long long)(c->streams[k].done_ns - requests));
    }
    len += (size_t)snprintf(list + len, cap - len, "]}");
  }
  /* The median connection's handshake (lower median for an even count). */
  for (int i = 1; i < a->connections; i++)
    for (int j = i; j > 0 && hs[j - 1] > hs[j]; j--) {
      uint64_t t = hs[j];
      hs[j] = hs[j - 1];
      hs[j - 1] = t;
    }
  nq_emit("{\"event\":\"done\",\"bytes\":%llu,\"handshake_ns\":%llu,\"transfer_ns\":%llu,\"elapsed_ns\":%llu,\"connections\":[%s]}",
          (unsigned long long)total, (unsigned long long)hs[(a->connections - 1) / 2],
          (unsigned long long)(last_byte - first_request), (unsigned long long)elapsed, list);
  free(hs);
  free(list);
}

int nq_run_client(const struct nq_args *a) {
  struct sockaddr_storage server;
  socklen_t serverlen;
  nq_parse_addr(a->connect, &server, &serverlen);
  gnutls_certificate_credentials_t cred = nq_tls_credentials(a);
  struct nq_conn *conns = calloc((size_t)a->connections, sizeof *conns);
  struct pollfd *fds = calloc((size_t)a->parallel, sizeof *fds);
  int *which = calloc((size_t)a->parallel, sizeof *which);
  if (!conns || !fds || !which) nq_die("out of memory");
  int started = 0, finished = 0;
  uint64_t first = nq_now(), next_progress = first + PROGRESS_EVERY;
  while (finished < a->connections) {
    int active = 0;
    for (int i = 0; i < started; i++) active += conns[i].conn && !conns[i].closed;
    while (active < a->parallel && started < a->connections) {
      start(&conns[started], a, cred, &server, serverlen, started);
      started++;
      active++;
    }
    int n = 0;
    uint64_t now = nq_now(), next = next_progress;
    for (int i = 0; i < started; i++) {
      struct nq_conn *c = &conns[i];
      if (!c->conn || c->closed) continue;
      fds[n] = (struct pollfd){c->fd, POLLIN, 0};
      which[n++] = i;
      uint64_t e = ngtcp2_conn_get_expiry(c->conn);
      if (e < next) next = e;
    }
    int wait_ms = next > now ? (int)((next - now + 999999) / 1000000) : 0;
    if (poll(fds, (nfds_t)n, wait_ms) < 0 && errno != EINTR) nq_die("poll: %s", strerror(errno));
    for (int k = 0; k < n; k++) {
      struct nq_conn *c = &conns[which[k]];
      if (fds[k].revents & (POLLIN | POLLERR)) receive(c);
      nq_conn_timer(c);
      if (c->closed) {
        int idle_s = (int)(NQ_IDLE_TIMEOUT / NGTCP2_SECONDS);
        if (c->error[0])
          fprintf(stderr, NQ_PROG ": client: connection %d: %s\n", which[k], c->error);
        else if (ngtcp2_conn_get_handshake_completed(c->conn))
          fprintf(stderr, NQ_PROG ": client: connection %d: nothing heard from the server for %d s (idle timeout) before every stream was verified\n", which[k], idle_s);
        else
          fprintf(stderr, NQ_PROG ": client: connection %d: handshake failed: no answer from the server within %d s (idle timeout)\n", which[k], idle_s);
        return 1;
      }
      if (all_done(c)) {
        nq_conn_close(c);
        finished++;
      }
    }
    if (nq_now() >= next_progress) {
      nq_emit("{\"event\":\"progress\",\"bytes\":%llu}", (unsigned long long)verified_total);
      next_progress += PROGRESS_EVERY;
    }
  }
  report(a, conns, first, nq_now() - first);
  for (int i = 0; i < a->connections; i++) nq_conn_free(&conns[i]);
  return 0;
}
