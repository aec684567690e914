/* nesquic-lut-ngtcp2: ngtcp2 (C, sans-IO) with GnuTLS (Debian 12's 0.12 packages, or a 1.x
 * checkout: compat.h), on this adapter's own poll loop (sendmsg with UDP GSO, recvmsg with UDP
 * GRO), speaking Nesquic's benchmark protocol (docs/protocol.md). `server` and `client` take the
 * same flags as every LUT executable. It depends on that description only, never on the
 * project's Rust crates. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char SUPPORTED[] = "gso=on|off, gro=on|off, rcvbuf=BYTES, sndbuf=BYTES, cc=newreno|cubic|bbr, cipher=aes128gcm|aes256gcm|chacha20";

static void usage(void) {
  fprintf(stderr,
          "usage: " NQ_PROG " server --listen ADDR --cert DER --key DER [--connections N] [--streams M] [--qlog PATH] [--opt K=V]...\n"
          "       " NQ_PROG " client --connect ADDR --ca DER --size BYTES [--connections N] [--parallel P] [--streams M] [--qlog PATH] [--opt K=V]...\n"
          "(docs/protocol.md; options: %s)\n",
          SUPPORTED);
  exit(2);
}

static int positive(const char *text, const char *what) {
  char *end;
  long v = strtol(text, &end, 10);
  if (*end || v < 1 || v > 1000000) nq_die("--%s %s: a count of at least 1 expected", what, text);
  return (int)v;
}

static void option(struct nq_options *o, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq) nq_die("option %s: expected KEY=VALUE; supported: %s", kv, SUPPORTED);
  size_t klen = (size_t)(eq - kv);
  const char *v = eq + 1;
#define KEY(name) (klen == sizeof name - 1 && strncmp(kv, name, klen) == 0)
  if (KEY("gso") || KEY("gro")) {
    if (strcmp(v, "on") && strcmp(v, "off")) nq_die("option %s: takes on or off", kv);
    *(KEY("gso") ? &o->gso : &o->gro) = strcmp(v, "on") == 0;
  } else if (KEY("rcvbuf") || KEY("sndbuf")) {
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n <= 0 || n > 1 << 30) nq_die("option %s: a byte count above 0 expected", kv);
    *(KEY("rcvbuf") ? &o->rcvbuf : &o->sndbuf) = (int)n;
  } else if (KEY("cc")) {
    if (!strcmp(v, "newreno")) o->cc = NGTCP2_CC_ALGO_RENO;
    else if (!strcmp(v, "cubic")) o->cc = NGTCP2_CC_ALGO_CUBIC;
    else if (!strcmp(v, "bbr")) o->cc = NGTCP2_CC_ALGO_BBR;
    else nq_die("option %s: ngtcp2 offers cc=newreno|cubic|bbr", kv);
  } else if (KEY("cipher")) {
    if (!strcmp(v, "aes128gcm")) o->cipher = "+AES-128-GCM";
    else if (!strcmp(v, "aes256gcm")) o->cipher = "+AES-256-GCM";
    else if (!strcmp(v, "chacha20")) o->cipher = "+CHACHA20-POLY1305";
    else nq_die("option %s: cipher takes aes128gcm, aes256gcm or chacha20", kv);
  } else {
    nq_die("unknown option %s; supported: %s", kv, SUPPORTED);
  }
#undef KEY
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) usage();
  struct nq_args a = {.server = strcmp(argv[1], "server") == 0, .connections = 1, .parallel = 1, .streams = 1};
  a.opt.gso = 1;
  a.opt.gro = 1;
  a.opt.cc = NGTCP2_CC_ALGO_CUBIC;
  const char *io = "native";
  enum { LISTEN = 1, CERT, KEY, CONNECT, CA, SIZE, CONNECTIONS, PARALLEL, STREAMS, IO, QLOG, OPT };
  static const struct option longs[] = {
      {"listen", 1, 0, LISTEN},   {"cert", 1, 0, CERT},         {"key", 1, 0, KEY},
      {"connect", 1, 0, CONNECT}, {"ca", 1, 0, CA},             {"size", 1, 0, SIZE},
      {"connections", 1, 0, CONNECTIONS}, {"parallel", 1, 0, PARALLEL}, {"streams", 1, 0, STREAMS},
      {"io", 1, 0, IO},           {"qlog", 1, 0, QLOG},         {"opt", 1, 0, OPT},
      {0, 0, 0, 0}};
  int c;
  optind = 2;
  while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
    switch (c) {
    case LISTEN: a.listen = optarg; break;
    case CERT: a.cert = optarg; break;
    case KEY: a.key = optarg; break;
    case CONNECT: a.connect = optarg; break;
    case CA: a.ca = optarg; break;
    case SIZE: {
      char *end;
      a.size = strtoull(optarg, &end, 10);
      if (*end || optarg[0] == '-') nq_die("--size %s: a byte count expected", optarg);
      break;
    }
    case CONNECTIONS: a.connections = positive(optarg, "connections"); break;
    case PARALLEL: a.parallel = positive(optarg, "parallel"); break;
    case STREAMS: a.streams = positive(optarg, "streams"); break;
    case IO: io = optarg; break;
    case QLOG: a.qlog = optarg; break;
    case OPT: option(&a.opt, optarg); break;
    default: usage();
    }
  }
  if (optind < argc) nq_die("unexpected argument %s", argv[optind]);
  if (strcmp(io, "native")) nq_die("--io %s: ngtcp2 runs only on this adapter's own loop (--io native)", io);
  if (a.server && (!a.listen || !a.cert || !a.key)) nq_die("server needs --listen, --cert and --key");
  if (!a.server && (!a.connect || !a.ca)) nq_die("client needs --connect, --ca and --size");
  if (a.parallel > a.connections) a.parallel = a.connections;
  nq_payload_init();
  return a.server ? nq_run_server(&a) : nq_run_client(&a);
}
