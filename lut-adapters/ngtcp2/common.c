/* Shared pieces of the ngtcp2 adapter: see common.h. */
#define _GNU_SOURCE
#include "common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

void nq_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, NQ_PROG ": ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

uint64_t nq_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * NGTCP2_SECONDS + (uint64_t)ts.tv_nsec;
}

void nq_emit(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stdout, fmt, ap);
  va_end(ap);
  fputc('\n', stdout);
  fflush(stdout);
}

void nq_parse_addr(const char *text, struct sockaddr_storage *ss, socklen_t *len) {
  char host[256];
  const char *colon = strrchr(text, ':');
  if (!colon || (size_t)(colon - text) >= sizeof host) nq_die("address %s: expected HOST:PORT", text);
  memcpy(host, text, (size_t)(colon - text));
  host[colon - text] = 0;
  char *h = host;
  if (h[0] == '[') {
    h++;
    h[strlen(h) - 1] = 0;
  }
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end || port < 0 || port > 65535) nq_die("address %s: bad port", text);
  memset(ss, 0, sizeof *ss);
  struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
  if (inet_pton(AF_INET, h, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    *len = sizeof *v4;
  } else if (inet_pton(AF_INET6, h, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
    *len = sizeof *v6;
  } else {
    nq_die("address %s: %s is not an IP address", text, h);
  }
}

void nq_format_addr(const struct sockaddr *sa, char *out, size_t outlen) {
  char ip[INET6_ADDRSTRLEN];
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
    inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof ip);
    snprintf(out, outlen, "[%s]:%u", ip, ntohs(v6->sin6_port));
  } else {
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
    inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof ip);
    snprintf(out, outlen, "%s:%u", ip, ntohs(v4->sin_port));
  }
}

static void set_buffer(int fd, int force, int plain, int size, const char *what) {
  if (size == 0) return;
  /* As root the FORCE variant ignores net.core.[rw]mem_max: the kernel grants twice the request. */
  if (setsockopt(fd, SOL_SOCKET, force, &size, sizeof size) == 0) return;
  if (setsockopt(fd, SOL_SOCKET, plain, &size, sizeof size) != 0) nq_die("%s=%d: %s", what, size, strerror(errno));
}

int nq_udp_open(const struct sockaddr *bind_to, socklen_t len, const struct nq_options *o, int report) {
  int fd = socket(bind_to->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) nq_die("socket: %s", strerror(errno));
  set_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, o->rcvbuf, "rcvbuf");
  set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, o->sndbuf, "sndbuf");
  int one = 1;
  /* GRO where the kernel has it: coalesced datagrams arrive with their size in a cmsg. */
  int gro = o->gro && setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof one) == 0;
  if (bind(fd, bind_to, len) != 0) {
    char text[64];
    nq_format_addr(bind_to, text, sizeof text);
    nq_die("bind %s: %s", text, strerror(errno));
  }
  if (report) {
    int rcv = 0, snd = 0, seg = 0;
    socklen_t l = sizeof rcv;
    getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &l);
    l = sizeof snd;
    getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &l);
    l = sizeof seg;
    /* The kernel knows UDP_SEGMENT on this socket: GSO can be used. */
    int gso = o->gso && getsockopt(fd, IPPROTO_UDP, UDP_SEGMENT, &seg, &l) == 0;
    nq_emit("{\"event\":\"io\",\"stack\":\"ngtcp2 %s + GnuTLS %s (the adapter's poll loop: sendmsg%s, recvmsg%s)\","
            "\"gso_max_segments\":%u,\"gro_segments\":%u,\"send_mmsg\":false,\"recv_mmsg\":false,\"recv_buffer\":%d,\"send_buffer\":%d}",
            ngtcp2_version(0)->version_str, gnutls_check_version(NULL), gso ? " with UDP GSO" : ", one datagram per call",
            gro ? " with UDP GRO" : ", one datagram per call", gso ? NQ_GSO_SEGMENTS : 1u, gro ? NQ_GSO_SEGMENTS : 1u, rcv, snd);
  }
  return fd;
}

int nq_udp_send(int fd, const struct sockaddr *to, socklen_t tolen, const uint8_t *data, size_t len, size_t segment) {
  struct iovec iov = {(void *)data, len};
  union {
    char buf[CMSG_SPACE(sizeof(uint16_t))];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {.msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = &iov, .msg_iovlen = 1};
  if (len > segment) {
    memset(&control, 0, sizeof control);
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = IPPROTO_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t seg = (uint16_t)segment;
    memcpy(CMSG_DATA(cm), &seg, sizeof seg);
  }
  for (;;) {
    if (sendmsg(fd, &msg, 0) >= 0) return 0;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) return -1;
    nq_die("sendmsg: %s", strerror(errno));
  }
}

size_t nq_udp_recv(int fd, uint8_t *buf, size_t cap, size_t *segment, struct sockaddr_storage *from, socklen_t *fromlen) {
  struct iovec iov = {buf, cap};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  for (;;) {
    struct msghdr msg = {.msg_name = from, .msg_namelen = sizeof *from, .msg_iov = &iov, .msg_iovlen = 1,
                         .msg_control = control.buf, .msg_controllen = sizeof control.buf};
    ssize_t n = recvmsg(fd, &msg, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      /* ECONNREFUSED: an ICMP error for an earlier datagram (nobody listened); QUIC retransmits. */
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNREFUSED) return 0;
      nq_die("recvmsg: %s", strerror(errno));
    }
    *fromlen = msg.msg_namelen;
    *segment = (size_t)n;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level == IPPROTO_UDP && cm->cmsg_type == UDP_GRO) {
        int size;
        memcpy(&size, CMSG_DATA(cm), sizeof size);
        if (size > 0) *segment = (size_t)size;
      }
    }
    if (n == 0) continue; /* an empty datagram: nothing for QUIC */
    return (size_t)n;
  }
}

void nq_settings(ngtcp2_settings *s, ngtcp2_transport_params *p, const struct nq_options *o, int server) {
  ngtcp2_settings_default(s);
  s->initial_ts = nq_now();
  s->cc_algo = o->cc;
  s->rand_ctx.native_handle = NULL;
  ngtcp2_transport_params_default(p);
  /* Windows as ngtcp2's own examples use them (its defaults are 0: nothing may be sent). */
  p->initial_max_stream_data_bidi_local = 6 * 1024 * 1024;
  p->initial_max_stream_data_bidi_remote = 6 * 1024 * 1024;
  p->initial_max_stream_data_uni = 6 * 1024 * 1024;
  p->initial_max_data = 15 * 1024 * 1024;
  p->initial_max_streams_bidi = server ? 1024 : 0;
  p->initial_max_streams_uni = 0;
  p->max_idle_timeout = NQ_IDLE_TIMEOUT;
  p->disable_active_migration = 1;
  s->max_window = 24 * 1024 * 1024;
  s->max_stream_window = 16 * 1024 * 1024;
}

const char *nq_priority(const struct nq_options *o) {
  static char priority[256];
  snprintf(priority, sizeof priority,
           "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:%s:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:%%DISABLE_TLS13_COMPAT_MODE",
           o->cipher ? o->cipher : "+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305");
  return priority;
}

gnutls_datum_t nq_read_file(const char *path, const char *what) {
  gnutls_datum_t d = {NULL, 0};
  int rv = gnutls_load_file(path, &d);
  if (rv < 0) nq_die("read %s %s: %s", what, path, gnutls_strerror(rv));
  return d;
}

void nq_random(uint8_t *out, size_t len) {
  if (getrandom(out, len, 0) != (ssize_t)len) nq_die("getrandom: %s", strerror(errno));
}

void nq_rand_cb(uint8_t *dest, size_t destlen, const ngtcp2_rand_ctx *ctx) {
  (void)ctx;
  nq_random(dest, destlen);
}

int nq_new_cid_cb(ngtcp2_conn *conn, ngtcp2_cid *cid, uint8_t *token, size_t cidlen, void *user_data) {
  (void)conn;
  (void)user_data;
  nq_random(cid->data, cidlen);
  cid->datalen = cidlen;
  nq_random(token, NGTCP2_STATELESS_RESET_TOKENLEN);
  return 0;
}

static void qlog_write(void *user_data, uint32_t flags, const void *data, size_t datalen) {
  (void)flags;
  struct nq_qlog *q = user_data;
  if (q->f) fwrite(data, 1, datalen, q->f);
}

void nq_qlog_open(struct nq_qlog *q, ngtcp2_settings *s, const char *path, int index) {
  char name[4096];
  if (index == 0) snprintf(name, sizeof name, "%s", path);
  else snprintf(name, sizeof name, "%s-%d", path, index);
  q->f = fopen(name, "w");
  if (!q->f) nq_die("--qlog %s: %s", name, strerror(errno));
  /* ngtcp2 times its events from settings.initial_ts: the wall clock at that instant. */
  struct timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  s->initial_ts = nq_now();
  nq_settings_qlog(s, qlog_write);
  nq_emit("{\"event\":\"qlog\",\"path\":\"%s\",\"start_unix_ns\":%llu}", name,
          (unsigned long long)wall.tv_sec * 1000000000ull + (unsigned long long)wall.tv_nsec);
}

void nq_qlog_close(struct nq_qlog *q) {
  if (q->f) fclose(q->f);
  q->f = NULL;
}
