/* What differs between the ngtcp2 APIs the adapter is written for, chosen at compile time from
 * the library's own version macro (NGTCP2_VERSION_NUM, ngtcp2/version.h, 0xMMmmpp):
 *   - 0.12.x: Debian 12's libngtcp2 (the pinned default, what build.sh links);
 *   - 1.x: upstream since 1.0.0, 2023-10 (checked: every release 1.0.0 to 1.25.0 and the default branch).
 * The differences it bridges: the CONNECTION_CLOSE error (0.12: ngtcp2_connection_close_error and
 * ngtcp2_conn_get_connection_close_error(), 1.x: ngtcp2_ccerr and ngtcp2_conn_get_ccerr()), the
 * qlog hook (0.12: settings.qlog.{write,odcid}, 1.x: settings.qlog_write, the original DCID being
 * the connection's own) and the server's original DCID transport parameter (1.x:
 * original_dcid_present must be set).
 * 0.13 to 0.19 renamed these pieces one release at a time on the way to 1.0: refused here with a
 * message rather than with the compiler's errors at each call. */
#ifndef NQ_COMPAT_H
#define NQ_COMPAT_H

#include <ngtcp2/ngtcp2.h>

#if !defined(NGTCP2_VERSION_NUM)
#error "ngtcp2/version.h defines no NGTCP2_VERSION_NUM: not an ngtcp2 this adapter knows"
#elif NGTCP2_VERSION_NUM >= 0x010000
#define NQ_NGTCP2_API 1

typedef ngtcp2_ccerr nq_ccerr;
/* The close error the peer sent (or the connection's own). */
static inline const nq_ccerr *nq_conn_ccerr(ngtcp2_conn *conn) { return ngtcp2_conn_get_ccerr(conn); }
static inline void nq_ccerr_application(nq_ccerr *e, uint64_t code) {
  ngtcp2_ccerr_set_application_error(e, code, NULL, 0);
}
static inline void nq_settings_qlog(ngtcp2_settings *s, ngtcp2_qlog_write write) {
  /* 1.x names the trace after the connection's original destination CID itself. */
  s->qlog_write = write;
}
static inline void nq_params_original_dcid(ngtcp2_transport_params *p, const ngtcp2_cid *dcid) {
  p->original_dcid = *dcid;
  p->original_dcid_present = 1;
}

#elif NGTCP2_VERSION_NUM >= 0x000c00 && NGTCP2_VERSION_NUM < 0x000d00
#define NQ_NGTCP2_API 0

typedef ngtcp2_connection_close_error nq_ccerr;
static inline const nq_ccerr *nq_conn_ccerr(ngtcp2_conn *conn) {
  static nq_ccerr e;
  ngtcp2_conn_get_connection_close_error(conn, &e);
  return &e;
}
static inline void nq_ccerr_application(nq_ccerr *e, uint64_t code) {
  ngtcp2_connection_close_error_set_application_error(e, code, NULL, 0);
}
void nq_random(uint8_t *out, size_t len);
static inline void nq_settings_qlog(ngtcp2_settings *s, ngtcp2_qlog_write write) {
  /* 0.12 takes the trace's ODCID from the application. */
  nq_random(s->qlog.odcid.data, 8);
  s->qlog.odcid.datalen = 8;
  s->qlog.write = write;
}
static inline void nq_params_original_dcid(ngtcp2_transport_params *p, const ngtcp2_cid *dcid) {
  p->original_dcid = *dcid;
}

#else
#error "this ngtcp2's API is not one the adapter is written for: it builds against ngtcp2 0.12.x (Debian 12) and 1.x (upstream since 1.0.0); 0.13-0.19 renamed the API on the way to 1.0 (check out a 1.x tag or the default branch)"
#endif

#endif
