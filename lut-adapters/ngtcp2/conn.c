/* One connection, both roles: GnuTLS session, ngtcp2 callbacks, reading, writing with GSO. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/x509.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include "common.h"

int64_t nq_corrupt_at = -1;

static const char ALPN[] = "nesquic";
static const char SERVER_NAME[] = "localhost";

gnutls_certificate_credentials_t nq_tls_credentials(const struct nq_args *a) {
  gnutls_certificate_credentials_t cred;
  if (gnutls_certificate_allocate_credentials(&cred) != 0) nq_die("gnutls: cannot allocate credentials");
  if (a->server) {
    gnutls_datum_t cert = nq_read_file(a->cert, "--cert"), key = nq_read_file(a->key, "--key");
    int rv = gnutls_certificate_set_x509_key_mem(cred, &cert, &key, GNUTLS_X509_FMT_DER);
    if (rv < 0) nq_die("--cert %s / --key %s: %s", a->cert, a->key, gnutls_strerror(rv));
    gnutls_free(cert.data);
    gnutls_free(key.data);
  } else {
    /* The run's certificate is the only trust anchor. */
    gnutls_datum_t ca = nq_read_file(a->ca, "--ca");
    int rv = gnutls_certificate_set_x509_trust_mem(cred, &ca, GNUTLS_X509_FMT_DER);
    if (rv <= 0) nq_die("--ca %s: %s", a->ca, rv < 0 ? gnutls_strerror(rv) : "no certificate in it");
    gnutls_free(ca.data);
  }
  return cred;
}

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref) { return ((struct nq_conn *)ref->user_data)->conn; }

void nq_tls_session(struct nq_conn *c, gnutls_certificate_credentials_t cred) {
  int server = c->args->server;
  unsigned flags = (server ? GNUTLS_SERVER : GNUTLS_CLIENT) | GNUTLS_ENABLE_EARLY_DATA | GNUTLS_NO_END_OF_EARLY_DATA;
  if (gnutls_init(&c->tls, flags) != 0) nq_die("gnutls_init failed");
  int rv = server ? ngtcp2_crypto_gnutls_configure_server_session(c->tls)
                  : ngtcp2_crypto_gnutls_configure_client_session(c->tls);
  if (rv != 0) nq_die("ngtcp2_crypto_gnutls_configure_%s_session failed", server ? "server" : "client");
  const char *err = NULL;
  if (gnutls_priority_set_direct(c->tls, nq_priority(&c->args->opt), &err) != 0)
    nq_die("GnuTLS priority %s: error at %s", nq_priority(&c->args->opt), err ? err : "?");
  gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, cred);
  gnutls_datum_t alpn = {(unsigned char *)ALPN, sizeof ALPN - 1};
  gnutls_alpn_set_protocols(c->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY);
  if (!server) {
    gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, SERVER_NAME, sizeof SERVER_NAME - 1);
    /* Verify chain and name during the handshake: a failure aborts it. */
    gnutls_session_set_verify_cert(c->tls, SERVER_NAME, 0);
  }
  c->ref.get_conn = get_conn;
  c->ref.user_data = c;
  gnutls_session_set_ptr(c->tls, &c->ref);
}

static int recv_stream_data(ngtcp2_conn *conn, uint32_t flags, int64_t id, uint64_t offset, const uint8_t *data,
                            size_t len, void *user_data, void *stream_user_data) {
  struct nq_conn *c = user_data;
  struct nq_stream *s = stream_user_data;
  if (!s) s = c->role->stream_open(c, id);
  if (!s) return NGTCP2_ERR_CALLBACK_FAILURE;
  if (c->role->stream_data(c, s, flags, offset, data, len) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
  /* Consumed: give the peer its credit back. */
  ngtcp2_conn_extend_max_stream_offset(conn, id, len);
  ngtcp2_conn_extend_max_offset(conn, len);
  return 0;
}

static int stream_open(ngtcp2_conn *conn, int64_t id, void *user_data) {
  struct nq_conn *c = user_data;
  struct nq_stream *s = c->role->stream_open(c, id);
  if (!s) return NGTCP2_ERR_CALLBACK_FAILURE;
  ngtcp2_conn_set_stream_user_data(conn, id, s);
  return 0;
}

static int handshake_completed(ngtcp2_conn *conn, void *user_data) {
  (void)conn;
  struct nq_conn *c = user_data;
  c->role->handshake(c);
  return 0;
}

static int extend_max_stream_data(ngtcp2_conn *conn, int64_t id, uint64_t max_data, void *user_data,
                                  void *stream_user_data) {
  (void)conn, (void)id, (void)max_data, (void)user_data;
  if (stream_user_data) ((struct nq_stream *)stream_user_data)->blocked = 0;
  return 0;
}

void nq_callbacks(ngtcp2_callbacks *cb, int server) {
  memset(cb, 0, sizeof *cb);
  if (server) {
    cb->recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
  } else {
    cb->client_initial = ngtcp2_crypto_client_initial_cb;
    cb->recv_retry = ngtcp2_crypto_recv_retry_cb;
  }
  cb->recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
  cb->encrypt = ngtcp2_crypto_encrypt_cb;
  cb->decrypt = ngtcp2_crypto_decrypt_cb;
  cb->hp_mask = ngtcp2_crypto_hp_mask_cb;
  cb->update_key = ngtcp2_crypto_update_key_cb;
  cb->delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
  cb->delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
  cb->get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
  cb->version_negotiation = ngtcp2_crypto_version_negotiation_cb;
  cb->rand = nq_rand_cb;
  cb->get_new_connection_id = nq_new_cid_cb;
  cb->recv_stream_data = recv_stream_data;
  cb->stream_open = stream_open;
  cb->handshake_completed = handshake_completed;
  cb->extend_max_stream_data = extend_max_stream_data;
}

static ngtcp2_path path_of(struct nq_conn *c) {
  ngtcp2_path p = {{(struct sockaddr *)&c->local, c->locallen}, {(struct sockaddr *)&c->remote, c->remotelen}, NULL};
  return p;
}

/* Why the handshake or connection failed, in words (certificate problems spelled out). */
static void describe_failure(struct nq_conn *c, int rv) {
  if (c->error[0]) return; /* a callback already said why (a payload mismatch, a bad request) */
  unsigned status = c->tls ? gnutls_session_get_verify_cert_status(c->tls) : 0;
  if (status != 0) {
    gnutls_datum_t text;
    if (gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0) == 0) {
      snprintf(c->error, sizeof c->error, "handshake failed: certificate verification failed: %s", text.data);
      gnutls_free(text.data);
      return;
    }
  }
  uint8_t alert = ngtcp2_conn_get_tls_alert(c->conn);
  snprintf(c->error, sizeof c->error, "%s: %s%s%s", ngtcp2_conn_get_handshake_completed(c->conn) ? "connection failed" : "handshake failed",
           ngtcp2_strerror(rv), alert ? ", TLS alert " : "", alert ? gnutls_alert_get_name((gnutls_alert_description_t)alert) : "");
}

void nq_conn_read(struct nq_conn *c, const uint8_t *pkt, size_t len) {
  if (c->closed) return;
  ngtcp2_path path = path_of(c);
  ngtcp2_pkt_info pi = {0};
  int rv = ngtcp2_conn_read_pkt(c->conn, &path, &pi, pkt, len, nq_now());
  if (rv == 0) return;
  if (rv == NGTCP2_ERR_DRAINING) {
    /* The peer closed: with an application error other than 0 that is a failure. */
    const nq_ccerr *e = nq_conn_ccerr(c->conn);
    if (e->error_code != 0 && !c->error[0])
      snprintf(c->error, sizeof c->error, "the peer closed the connection with error 0x%llx (%.*s)",
               (unsigned long long)e->error_code, (int)e->reasonlen, e->reason ? (const char *)e->reason : "");
    c->closed = 1;
    return;
  }
  describe_failure(c, rv);
  c->closed = 1;
}

/* The next stream with data to hand to ngtcp2 (round-robin), or NULL. */
static struct nq_stream *next_stream(struct nq_conn *c) {
  for (int k = 0; k < c->opened; k++) {
    struct nq_stream *s = &c->streams[(c->rr + k) % c->opened];
    if (!s->fin_sent && !s->blocked && s->id >= 0 && (s->send_total > 0 || s->fixed || s->done)) {
      c->rr = (c->rr + k + 1) % c->opened;
      return s;
    }
  }
  return NULL;
}

/* Where the stream's next bytes are: the request, or up to NQ_WINDOW bytes of the pattern. From
 * the start of the period holding NESQUIC_FAULT_SERVER_CORRUPT_AT they come from a copy of the
 * block with that one byte flipped (made once: ngtcp2 keeps the pointers until acknowledged), and
 * a window before that period ends where it starts. */
static ngtcp2_vec next_chunk(struct nq_stream *s) {
  ngtcp2_vec v;
  if (s->fixed) {
    v.base = (uint8_t *)s->fixed + s->sent;
    v.len = s->send_total - s->sent;
    return v;
  }
  static uint8_t *corrupt;
  uint64_t phase = s->sent % NQ_PERIOD, left = s->send_total - s->sent;
  uint64_t len = left < NQ_WINDOW ? left : NQ_WINDOW;
  const uint8_t *block = nq_block;
  if (nq_corrupt_at >= 0) {
    uint64_t at = (uint64_t)nq_corrupt_at, start = at - at % NQ_PERIOD;
    if (s->sent < start && s->sent + len > start) {
      len = start - s->sent;
    } else if (s->sent / NQ_PERIOD == at / NQ_PERIOD) {
      if (!corrupt) {
        corrupt = malloc(NQ_BLOCK);
        if (!corrupt) nq_die("out of memory");
        memcpy(corrupt, nq_block, NQ_BLOCK);
        /* Block index at % PERIOD is stream offset `at` in every window starting in its period. */
        corrupt[at % NQ_PERIOD] ^= 0xff;
      }
      block = corrupt;
    }
  }
  v.base = (uint8_t *)block + phase;
  v.len = len;
  return v;
}

void nq_conn_write(struct nq_conn *c) {
  static uint8_t buf[NQ_GSO_BYTES];
  if (c->closed) return;
  ngtcp2_path path = path_of(c);
  ngtcp2_pkt_info pi;
  ngtcp2_tstamp ts = nq_now();
  size_t max = ngtcp2_conn_get_max_tx_udp_payload_size(c->conn);
  size_t limit = 1;
  if (c->args->opt.gso) {
    limit = NQ_GSO_BYTES / max;
    if (limit > NQ_GSO_SEGMENTS) limit = NQ_GSO_SEGMENTS;
  }
  /* A GSO batch holds datagrams of one size (the first one's), the last may be shorter: later
   * packets are written into at most that size, and a shorter one ends the batch. */
  size_t used = 0, count = 0, segment = max;
  for (int k = 0; k < c->opened; k++) c->streams[k].blocked = 0;
  for (;;) {
    struct nq_stream *s = next_stream(c);
    ngtcp2_vec v = {0};
    uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_NONE;
    int64_t id = -1;
    if (s) {
      v = next_chunk(s);
      id = s->id;
      if (s->sent + v.len == s->send_total) flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
    }
    ngtcp2_ssize taken = -1;
    ngtcp2_ssize n = ngtcp2_conn_writev_stream(c->conn, &path, &pi, buf + used, count ? segment : max, &taken, flags, id,
                                               s ? &v : NULL, s ? 1 : 0, ts);
    if (n < 0) {
      if (s && (n == NGTCP2_ERR_STREAM_DATA_BLOCKED || n == NGTCP2_ERR_STREAM_SHUT_WR)) {
        s->blocked = 1;
        continue;
      }
      describe_failure(c, (int)n);
      c->closed = 1;
      return;
    }
    if (s && taken >= 0) {
      s->sent += (uint64_t)taken;
      if ((flags & NGTCP2_WRITE_STREAM_FLAG_FIN) && s->sent == s->send_total) s->fin_sent = 1;
    }
    if (n == 0) break;
    if (count == 0) segment = (size_t)n;
    used += (size_t)n;
    count++;
    if ((size_t)n < segment || count == limit) {
      if (nq_udp_send(c->fd, (struct sockaddr *)&c->remote, c->remotelen, buf, used, segment) != 0) break;
      used = count = 0;
    }
  }
  if (used) nq_udp_send(c->fd, (struct sockaddr *)&c->remote, c->remotelen, buf, used, segment);
  ngtcp2_conn_update_pkt_tx_time(c->conn, ts);
}

void nq_conn_timer(struct nq_conn *c) {
  if (c->closed) return;
  ngtcp2_tstamp now = nq_now();
  if (ngtcp2_conn_get_expiry(c->conn) <= now) {
    int rv = ngtcp2_conn_handle_expiry(c->conn, now);
    if (rv == NGTCP2_ERR_IDLE_CLOSE) {
      c->closed = 1;
      return;
    }
    if (rv != 0) {
      describe_failure(c, rv);
      c->closed = 1;
      return;
    }
  }
  nq_conn_write(c);
}

void nq_conn_close(struct nq_conn *c) {
  if (c->closed) return;
  uint8_t buf[1500];
  ngtcp2_path path = path_of(c);
  ngtcp2_pkt_info pi;
  nq_ccerr e;
  nq_ccerr_application(&e, 0);
  ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c->conn, &path, &pi, buf, sizeof buf, &e, nq_now());
  if (n > 0) nq_udp_send(c->fd, (struct sockaddr *)&c->remote, c->remotelen, buf, (size_t)n, (size_t)n);
  c->closed = 1;
}

void nq_conn_free(struct nq_conn *c) {
  if (c->conn) ngtcp2_conn_del(c->conn);
  if (c->tls) gnutls_deinit(c->tls);
  nq_qlog_close(&c->qlog);
  free(c->streams);
  c->conn = NULL;
  c->tls = NULL;
  c->streams = NULL;
}
