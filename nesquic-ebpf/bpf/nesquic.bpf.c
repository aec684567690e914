// SPDX-License-Identifier: GPL-2.0
/* Nesquic's eBPF programs.
 *
 * - Syscall tracepoints (enter + exit) for send/receive (and write/read/writev/readv/sendfile on
 *   an inet socket): per (role, syscall) calls, bytes (from the
 *   return value / msg_len at exit, never buffer sizes), datagrams (UDP_SEGMENT on send, UDP_GRO
 *   stride on receive), errors, EAGAIN and a log2 latency histogram.
 * - One uprobe/uretprobe pair shared by every probed function; the attach cookie says which.
 * Only processes in `targets` (LUT pids, filled by the loader before they exec) are measured.
 * Everything is aggregated here in per-CPU maps: no event per call crosses to user space. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>
#include "nesquic.h"

#define SOL_UDP 17
#define UDP_SEGMENT 103
#define UDP_GRO 104
#define EAGAIN 11
#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define AF_INET 2
#define AF_INET6 10
#define SOCK_STREAM 1

char LICENSE[] SEC("license") = "GPL";

/* tgid -> role */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NQ_MAX_ROLES * NQ_SYSCALLS);
	__type(key, __u32);
	__type(value, struct nq_stats);
} io_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NQ_MAX_ROLES * NQ_MAX_FUNCS);
	__type(key, __u32);
	__type(value, struct nq_stats);
} func_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NQ_MAX_FUNCS);
	__type(key, __u32);
	__type(value, struct nq_func_config);
} func_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nq_health);
} health SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nq_settings);
} settings SEC(".maps");

/* Per-message events, only with --qlog-datagrams (off by default: aggregate in the kernel). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} datagram_events SEC(".maps");

struct io_call {
	__u64 start_ns;
	__u64 msg;   /* user pointer: msghdr or mmsghdr array (0 for sendto/recvfrom) */
	__u32 kind;
	__u32 role;
	/* 1: the fd is a datagram socket; 0: a stream socket (TCP), whose calls move bytes but no
	 * datagrams. A number the exit multiplies by, never branches on (see io_exit). */
	__u32 datagram_socket;
	__u32 pad;
};

/* thread (pid_tgid) -> syscall in flight */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct io_call);
} io_inflight SEC(".maps");

struct func_key {
	__u64 pid_tgid;
	__u64 cookie;
};

struct func_call {
	__u64 start_ns;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct func_key);
	__type(value, struct func_call);
} func_inflight SEC(".maps");

static __always_inline struct nq_health *health_slot(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&health, &zero);
}

static __always_inline __u32 log2_bucket(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r < NQ_HIST_BUCKETS ? r : NQ_HIST_BUCKETS - 1;
}

static __always_inline void record_time(struct nq_stats *s, __u64 ns)
{
	s->calls += 1;
	s->total_ns += ns;
	__u32 b = log2_bucket(ns);
	if (b < NQ_HIST_BUCKETS)
		s->hist[b] += 1;
}

static __always_inline __u32 *role_of_current(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	return bpf_map_lookup_elem(&targets, &tgid);
}

/* ---- packet I/O ---- */

static __always_inline int io_enter(__u32 kind, __u64 msg, __u32 stream_socket)
{
	__u32 *role = role_of_current();
	if (!role)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	struct io_call call = {
		.start_ns = bpf_ktime_get_ns(),
		.msg = msg,
		.kind = kind,
		.role = *role,
		.datagram_socket = stream_socket ? 0 : 1,
	};
	if (bpf_map_update_elem(&io_inflight, &id, &call, BPF_ANY) != 0) {
		struct nq_health *h = health_slot();
		if (h)
			h->inflight_full += 1;
	}
	return 0;
}

/* The UDP_SEGMENT (send) or UDP_GRO (receive) value in a message's control data, 0 if absent. */
static __always_inline __u32 udp_cmsg_value(const struct user_msghdr *m, int type, struct nq_health *h)
{
	void *control = NULL;
	__u64 controllen = 0;
	if (bpf_probe_read_user(&control, sizeof(control), &m->msg_control) ||
	    bpf_probe_read_user(&controllen, sizeof(controllen), &m->msg_controllen)) {
		if (h)
			h->user_read_failures += 1;
		return 0;
	}
	__u64 off = 0;
	for (int i = 0; i < NQ_MAX_CMSGS; i++) {
		struct cmsghdr c;
		if (!control || off + sizeof(c) > controllen)
			break;
		if (bpf_probe_read_user(&c, sizeof(c), control + off)) {
			if (h)
				h->user_read_failures += 1;
			break;
		}
		if (c.cmsg_len < sizeof(c))
			break;
		if (c.cmsg_level == SOL_UDP && c.cmsg_type == type) {
			if (type == UDP_SEGMENT) {
				__u16 seg = 0;
				bpf_probe_read_user(&seg, sizeof(seg), control + off + sizeof(c));
				return seg;
			}
			int stride = 0;
			bpf_probe_read_user(&stride, sizeof(stride), control + off + sizeof(c));
			return stride > 0 ? (__u32)stride : 0;
		}
		off += (c.cmsg_len + 7) & ~7ULL;
	}
	return 0;
}

static __always_inline __u64 datagrams_in(__u64 len, __u32 unit)
{
	if (len == 0)
		return 1; /* an empty datagram is still one */
	if (unit == 0 || unit >= len)
		return 1;
	return (len + unit - 1) / unit;
}

static __always_inline int datagram_events_on(void)
{
	__u32 zero = 0;
	struct nq_settings *cfg = bpf_map_lookup_elem(&settings, &zero);
	return cfg && cfg->datagram_events;
}

static __always_inline int functions_paused(void)
{
	__u32 zero = 0;
	struct nq_settings *cfg = bpf_map_lookup_elem(&settings, &zero);
	return cfg && cfg->functions_paused;
}

static __always_inline int duty_cycling(void)
{
	__u32 zero = 0;
	struct nq_settings *cfg = bpf_map_lookup_elem(&settings, &zero);
	return cfg && cfg->window_start_ns != 0;
}

/* An in-flight entry from before the current duty-cycle window: its return probe was detached. */
static __always_inline int stale_call(const struct func_call *call)
{
	__u32 zero = 0;
	struct nq_settings *cfg = bpf_map_lookup_elem(&settings, &zero);
	return cfg && call->start_ns < cfg->window_start_ns;
}

static __always_inline void emit_message(__u64 ts, __u32 role, __u32 kind, __u64 bytes, __u64 datagrams, __u32 unit,
					 struct nq_health *h)
{
	struct nq_datagram_event *e = bpf_ringbuf_reserve(&datagram_events, sizeof(*e), 0);
	if (!e) {
		if (h)
			h->events_dropped += 1;
		return;
	}
	e->ts_ns = ts;
	e->bytes = bytes;
	e->role = role;
	e->kind = kind;
	e->datagrams = datagrams;
	e->segment = (unit && unit < bytes) ? unit : bytes;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline int io_exit(long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct io_call *call = bpf_map_lookup_elem(&io_inflight, &id);
	if (!call)
		return 0;
	struct io_call c = *call;
	bpf_map_delete_elem(&io_inflight, &id);
	if (c.role >= NQ_MAX_ROLES || c.kind >= NQ_SYSCALLS)
		return 0;
	__u32 idx = c.role * NQ_SYSCALLS + c.kind;
	struct nq_stats *s = bpf_map_lookup_elem(&io_stats, &idx);
	if (!s)
		return 0;
	record_time(s, bpf_ktime_get_ns() - c.start_ns);
	if (ret < 0) {
		if (ret == -EAGAIN)
			s->eagain += 1;
		else
			s->errors += 1;
		return 0;
	}
	struct nq_health *h = health_slot();
	/* Only the msghdr calls read a cmsg: sends are kinds 0-2, receives 3-5; the write/read kinds
	 * never reach a cmsg. Keep this one comparison: folding those kinds in here split the
	 * verifier's states through the mmsg loop, and Debian 12's 6.1 gave up at 1M insns. */
	int cmsg_type = c.kind <= NQ_SENDTO ? UDP_SEGMENT : UDP_GRO;
	/* 1 on a datagram socket, 0 on a stream socket, whose calls move bytes but no datagrams. Read
	 * from the map, so neither the compiler nor the verifier knows it is 0 or 1: it is multiplied
	 * in, never branched on. A branch here split the verifier's states through the mmsg loop, and
	 * Debian 12's 6.1 gave up at 1M instructions. */
	__u64 dgram = c.datagram_socket;
	int emit = datagram_events_on();
	__u64 now = bpf_ktime_get_ns();
	switch (c.kind) {
	case NQ_SENDTO:
	case NQ_RECVFROM:
	case NQ_WRITE:
	case NQ_WRITEV:
	case NQ_SENDFILE:
	case NQ_READ:
	case NQ_READV:
		s->bytes += ret;
		s->datagrams += dgram;
		s->messages += dgram;
		if (emit)
			emit_message(now, c.role, c.kind, ret, dgram, 0, h);
		break;
	case NQ_SENDMSG:
	case NQ_RECVMSG: {
		const struct user_msghdr *m = (const void *)c.msg;
		__u32 unit = udp_cmsg_value(m, cmsg_type, h);
		__u64 n = datagrams_in(ret, unit) * dgram;
		s->bytes += ret;
		s->datagrams += n;
		s->messages += dgram;
		s->segmented += n > 1;
		if (emit)
			emit_message(now, c.role, c.kind, ret, n, unit, h);
		break;
	}
	case NQ_SENDMMSG:
	case NQ_RECVMMSG: {
		/* ret = messages processed; each one's byte count is its msg_len. */
		const struct mmsghdr *v = (const void *)c.msg;
		for (int i = 0; i < NQ_MAX_BATCH; i++) {
			if (i >= ret)
				break;
			__u32 len = 0;
			if (bpf_probe_read_user(&len, sizeof(len), &v[i].msg_len)) {
				if (h)
					h->user_read_failures += 1;
				break;
			}
			__u32 unit = udp_cmsg_value(&v[i].msg_hdr, cmsg_type, h);
			__u64 n = datagrams_in(len, unit) * dgram;
			s->bytes += len;
			s->datagrams += n;
			s->messages += dgram;
			s->segmented += n > 1;
			if (emit)
				emit_message(now, c.role, c.kind, len, n, unit, h);
		}
		if (ret > NQ_MAX_BATCH && h)
			h->truncated_batches += 1;
		break;
	}
	}
	return 0;
}

/* The open file behind `fd` of the current process, or NULL. The task's own pointers are read
 * directly (BTF-typed loads, no helper call); the array slot with a probe read. */
static __always_inline struct file *fd_file(long fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct files_struct *files = task->files;
	if (!files)
		return NULL;
	struct fdtable *fdt = files->fdt;
	if (!fdt || fd < 0 || fd >= fdt->max_fds)
		return NULL;
	struct file **fds = fdt->fd;
	struct file *file = NULL;
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]))
		return NULL;
	return file;
}

/* Whether a socket system call's fd is a stream socket (TCP, a Unix stream), whose calls move
 * bytes but no datagrams. The system call itself fails on anything but a socket, so the file's
 * private data is taken as its socket unchecked (a failed read says "not a stream"): two probe
 * reads, ~70 ns a call more than not looking (BPF run-time statistics, quic-go). */
static __always_inline __u32 socket_is_stream(long fd)
{
	struct file *file = fd_file(fd);
	if (!file)
		return 0;
	struct socket *sock = BPF_CORE_READ(file, private_data);
	return sock && BPF_CORE_READ(sock, type) == SOCK_STREAM;
}

/* What `fd` is for write/read and friends: NQ_FD_INET (an IPv4/IPv6 socket, TCP or UDP) and
 * NQ_FD_STREAM (a stream socket), or 0 (a file, a pipe, a Unix socket, no such fd): their reads
 * and writes of files, pipes and Unix sockets are not network I/O. */
#define NQ_FD_INET 1
#define NQ_FD_STREAM 2
static __always_inline __u32 fd_kind(long fd)
{
	struct file *file = fd_file(fd);
	if (!file || (BPF_CORE_READ(file, f_inode, i_mode) & S_IFMT) != S_IFSOCK)
		return 0;
	struct socket *sock = BPF_CORE_READ(file, private_data);
	__u16 family = BPF_CORE_READ(sock, sk, __sk_common.skc_family);
	if (family != AF_INET && family != AF_INET6)
		return 0;
	return NQ_FD_INET | (BPF_CORE_READ(sock, type) == SOCK_STREAM ? NQ_FD_STREAM : 0);
}

#define IO_PROBES(name, kind, msg_arg)                                                    \
	SEC("tracepoint/syscalls/sys_enter_" #name)                                       \
	int nq_enter_##name(struct trace_event_raw_sys_enter *ctx)                        \
	{                                                                                 \
		if (!role_of_current())                                                   \
			return 0;                                                         \
		__u32 stream = socket_is_stream(ctx->args[0]);                            \
		return io_enter(kind, msg_arg, stream);                                   \
	}                                                                                 \
	SEC("tracepoint/syscalls/sys_exit_" #name)                                        \
	int nq_exit_##name(struct trace_event_raw_sys_exit *ctx)                          \
	{                                                                                 \
		return io_exit(ctx->ret);                                                 \
	}

IO_PROBES(sendmsg, NQ_SENDMSG, ctx->args[1])
IO_PROBES(sendmmsg, NQ_SENDMMSG, ctx->args[1])
IO_PROBES(sendto, NQ_SENDTO, 0)
IO_PROBES(recvmsg, NQ_RECVMSG, ctx->args[1])
IO_PROBES(recvmmsg, NQ_RECVMMSG, ctx->args[1])
IO_PROBES(recvfrom, NQ_RECVFROM, 0)

/* write/read and friends: followed like the socket calls when their fd is an inet socket. */
#define FD_IO_PROBES(name, tracepoint, kind)                                              \
	SEC("tracepoint/syscalls/sys_enter_" #tracepoint)                                 \
	int nq_enter_##name(struct trace_event_raw_sys_enter *ctx)                        \
	{                                                                                 \
		if (!role_of_current())                                                   \
			return 0;                                                         \
		__u32 fd = fd_kind(ctx->args[0]);                                         \
		if (!(fd & NQ_FD_INET))                                                   \
			return 0;                                                         \
		return io_enter(kind, 0, (fd & NQ_FD_STREAM) != 0);                       \
	}                                                                                 \
	SEC("tracepoint/syscalls/sys_exit_" #tracepoint)                                  \
	int nq_exit_##name(struct trace_event_raw_sys_exit *ctx)                          \
	{                                                                                 \
		return io_exit(ctx->ret);                                                 \
	}

FD_IO_PROBES(write, write, NQ_WRITE)
FD_IO_PROBES(writev, writev, NQ_WRITEV)
/* sendfile(out_fd, in_fd, ...): counted when out_fd is a socket (the kernel's tracepoint name). */
FD_IO_PROBES(sendfile, sendfile64, NQ_SENDFILE)
FD_IO_PROBES(read, read, NQ_READ)
FD_IO_PROBES(readv, readv, NQ_READV)

/* A LUT that forks: its children inherit the role. (Threads land here too; their tids are never
 * looked up as a tgid while they live, and the loader clears the map between runs.) */
SEC("tracepoint/sched/sched_process_fork")
int nq_fork(struct trace_event_raw_sched_process_fork *ctx)
{
	__u32 *role = role_of_current();
	if (!role)
		return 0;
	__u32 child = ctx->child_pid;
	__u32 r = *role;
	bpf_map_update_elem(&targets, &child, &r, BPF_NOEXIST);
	return 0;
}

/* ---- in-kernel packet I/O: the UDP path's functions ----
 * Each function gets four programs (fentry, fexit, kprobe, kretprobe); the loader attaches one
 * pair per function, whichever mechanism this kernel allows (fentry under lockdown is EPERM).
 * Calls are attributed to the task running them: on loopback and veth the receive side's softirq
 * work (GRO) usually runs in the sending LUT's context. */

struct kfunc_key {
	__u64 pid_tgid;
	__u32 fid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NQ_MAX_ROLES * NQ_KFUNCS);
	__type(key, __u32);
	__type(value, struct nq_stats);
} kfunc_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct kfunc_key);
	__type(value, __u64);
} kfunc_inflight SEC(".maps");

static __always_inline int kfunc_enter(__u32 fid)
{
	if (!role_of_current())
		return 0;
	struct kfunc_key key = { .pid_tgid = bpf_get_current_pid_tgid(), .fid = fid };
	__u64 now = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&kfunc_inflight, &key, &now, BPF_ANY) != 0) {
		struct nq_health *h = health_slot();
		if (h)
			h->inflight_full += 1;
	}
	return 0;
}

static __always_inline int kfunc_exit(__u32 fid)
{
	__u32 *role = role_of_current();
	if (!role)
		return 0;
	struct kfunc_key key = { .pid_tgid = bpf_get_current_pid_tgid(), .fid = fid };
	__u64 *start = bpf_map_lookup_elem(&kfunc_inflight, &key);
	if (!start)
		return 0; /* attached mid-call */
	__u64 ns = bpf_ktime_get_ns() - *start;
	bpf_map_delete_elem(&kfunc_inflight, &key);
	__u32 r = *role;
	if (r >= NQ_MAX_ROLES || fid >= NQ_KFUNCS)
		return 0;
	__u32 idx = r * NQ_KFUNCS + fid;
	struct nq_stats *s = bpf_map_lookup_elem(&kfunc_stats, &idx);
	if (s)
		record_time(s, ns);
	return 0;
}

#define KFUNC_PROBES(func, fid)                                                           \
	SEC("fentry/" #func)                                                              \
	int nq_fe_##func(void *ctx) { return kfunc_enter(fid); }                          \
	SEC("fexit/" #func)                                                               \
	int nq_fx_##func(void *ctx) { return kfunc_exit(fid); }                           \
	SEC("kprobe/" #func)                                                              \
	int nq_kp_##func(struct pt_regs *ctx) { return kfunc_enter(fid); }                \
	SEC("kretprobe/" #func)                                                           \
	int nq_kr_##func(struct pt_regs *ctx) { return kfunc_exit(fid); }

KFUNC_PROBES(udp_sendmsg, NQ_K_UDP_SENDMSG)
KFUNC_PROBES(udp_recvmsg, NQ_K_UDP_RECVMSG)
KFUNC_PROBES(__udp_gso_segment, NQ_K_UDP_GSO_SEGMENT)
KFUNC_PROBES(udp_gro_receive, NQ_K_UDP_GRO_RECEIVE)
KFUNC_PROBES(ip_output, NQ_K_IP_OUTPUT)
KFUNC_PROBES(dev_hard_start_xmit, NQ_K_DEV_XMIT)
KFUNC_PROBES(ip_generic_getfrag, NQ_K_COPY_FROM_USER)
KFUNC_PROBES(skb_copy_datagram_iter, NQ_K_COPY_TO_USER)

/* ---- functions (uprobes) ---- */

static __always_inline __u64 register_arg(struct pt_regs *ctx, __u32 n)
{
	/* Load every argument register at a constant offset first: the verifier rejects context
	 * accesses at a computed offset, which is what a switch on n would compile into. Eight
	 * slots so that `& 7` below bounds the index to initialised stack. */
	__u64 regs[8] = { ctx->di, ctx->si, ctx->dx, ctx->cx, ctx->r8, ctx->r9, 0, 0 };
	if (n >= 7 && n <= 8) {
		/* Stack arguments: at function entry [sp] is the return address, then arg 7, 8. */
		__u64 v = 0;
		bpf_probe_read_user(&v, sizeof(v), (void *)(ctx->sp + 8 * (n - 6)));
		return v;
	}
	if (n < 1 || n > 6)
		return 0;
	/* 6.1's verifier loses the range check above across the 32->64-bit zero extension
	 * (`<<32 >>32`): "invalid unbounded variable-offset read from stack". barrier_var hides the
	 * check from the compiler so the mask survives, and the mask alone bounds the index. */
	__u64 i = n - 1;
	barrier_var(i);
	return regs[i & 7];
}

SEC("uprobe")
int nq_func_enter(struct pt_regs *ctx)
{
	/* Duty cycle: outside a counting window no call starts being measured. */
	if (!role_of_current() || functions_paused())
		return 0;
	struct func_key key = { .pid_tgid = bpf_get_current_pid_tgid(), .cookie = bpf_get_attach_cookie(ctx) };
	struct func_call call = { .start_ns = bpf_ktime_get_ns() };
	__u32 cfg_key = key.cookie;
	struct nq_func_config *cfg = bpf_map_lookup_elem(&func_config, &cfg_key);
	if (cfg && cfg->bytes_arg)
		call.bytes = register_arg(ctx, cfg->bytes_arg);
	if (cfg && cfg->count_only) {
		/* Counting mode: no return probe will come; aggregate here. */
		__u32 *role = role_of_current();
		if (!role || *role >= NQ_MAX_ROLES || cfg_key >= NQ_MAX_FUNCS)
			return 0;
		__u32 idx = *role * NQ_MAX_FUNCS + cfg_key;
		struct nq_stats *s = bpf_map_lookup_elem(&func_stats, &idx);
		if (s) {
			s->calls += 1;
			s->bytes += call.bytes;
		}
		return 0;
	}
	struct nq_health *h = health_slot();
	if (bpf_map_update_elem(&func_inflight, &key, &call, BPF_NOEXIST) != 0) {
		/* Either re-entered (recursion), a stale entry, or the map is full. */
		struct func_call *old = bpf_map_lookup_elem(&func_inflight, &key);
		if (old) {
			if (h && !stale_call(old))
				h->nested_overwrites += 1;
			bpf_map_update_elem(&func_inflight, &key, &call, BPF_ANY);
		} else if (h) {
			h->inflight_full += 1;
		}
	}
	return 0;
}

SEC("uretprobe")
int nq_func_exit(struct pt_regs *ctx)
{
	__u32 *role = role_of_current();
	if (!role)
		return 0;
	struct func_key key = { .pid_tgid = bpf_get_current_pid_tgid(), .cookie = bpf_get_attach_cookie(ctx) };
	struct func_call *call = bpf_map_lookup_elem(&func_inflight, &key);
	if (!call) {
		/* Duty cycle: the call began outside the window, so nothing was recorded. */
		if (functions_paused() || duty_cycling())
			return 0;
		struct nq_health *h = health_slot();
		if (h)
			h->exit_without_entry += 1;
		return 0;
	}
	if (stale_call(call)) {
		bpf_map_delete_elem(&func_inflight, &key);
		return 0;
	}
	__u64 ns = bpf_ktime_get_ns() - call->start_ns;
	__u64 bytes = call->bytes;
	bpf_map_delete_elem(&func_inflight, &key);
	__u32 r = *role;
	if (r >= NQ_MAX_ROLES || key.cookie >= NQ_MAX_FUNCS)
		return 0;
	__u32 idx = r * NQ_MAX_FUNCS + (__u32)key.cookie;
	struct nq_stats *s = bpf_map_lookup_elem(&func_stats, &idx);
	if (!s)
		return 0;
	record_time(s, ns);
	s->bytes += bytes;
	return 0;
}

/* ---- sampling profile ---- */

/* The stack map's value size caps how far the kernel walks each sampled stack. 127 frames (the
 * kernel's maximum) cost ~13% goodput on quinn: without frame pointers the user-stack walk chases
 * garbage; 32 frames cost ~1% (measured with --overhead, docs/probe-overhead.md). */
#define NQ_STACK_DEPTH 32
#define NQ_EEXIST 17

/* A stack whose hash bucket holds another is lost (counted, not relabelled): at 999 Hz nearly
 * every sample brings a new stack, and 16384 buckets lost 3.9-4.3% of quinn's 1 GB samples.
 * Deep interpreter stacks fill it faster: aioquic 500 MB lost 14.2%/12.6% of each side's samples'
 * stacks at 65536 buckets, 4.2%/3.3% at 262144 (73 MB of kernel memory while profiling, was 18 MB;
 * program time per sample and session start unchanged within noise). */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 262144);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, NQ_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct nq_sample_key);
	__type(value, __u64);
} samples SEC(".maps");

/* The task's user registers as saved on entry to the kernel (the top of its kernel stack): where
 * its user-stack walk starts, whether the sample hit user or kernel mode. NULL for a kernel
 * thread, which has no user side. */
static __always_inline struct pt_regs *user_regs(struct task_struct *task)
{
	if (!task->mm)
		return NULL;
	return (struct pt_regs *)bpf_task_pt_regs(task);
}

/* The word at the user stack pointer, when the user leaf is outside the executable's own code;
 * else 0. A frameless leaf (glibc's memcpy, syscall wrappers: shared-library assembly) keeps its
 * return address there, which the frame-pointer walk skips; user space inserts it when the leaf
 * has no frame. In the executable (Rust and C built with frame pointers) the word is data that
 * would make nearly every sample a new map key. (Checking that the word points into executable
 * memory with bpf_find_vma cost ~5 us per sample: measured, docs/probe-overhead.md.)
 * When the user stack was lost to a collision (`user_lost`), the leaf's own address instead:
 * the sample then keeps its innermost function (session.rs reads it as a one-frame stack). */
static __always_inline __u64 user_word(int user_lost)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *user = user_regs(task);
	struct mm_struct *mm = task->mm;
	__u64 word = 0;
	if (!user || !mm)
		return 0;
	if (user_lost)
		return user->ip;
	if (user->ip >= mm->start_code && user->ip < mm->end_code)
		return 0;
	if (bpf_probe_read_user(&word, sizeof(word), (void *)user->sp) != 0)
		return 0;
	return word;
}

/* What the sampler costs, timed by the program itself on the LUT's samples, apart for the
 * samples that inserted a new key (a stack pair first seen: cold map memory, new stack-map
 * buckets) and those that found theirs. Not the kernel's BPF run-time statistics: turning those
 * on cost a UDP send/receive loop ~2% while on, even with no BPF program loaded (measured,
 * bench/profile-999.md). Layout: profile::SamplerCounters. */
struct nq_sampler_cost {
	__u64 ticks;     /* every run, on every CPU, the LUT's or not */
	__u64 samples;   /* the LUT's, whose key existed */
	__u64 sample_ns;
	__u64 inserts;   /* the LUT's, that inserted their key */
	__u64 insert_ns;
	__u64 kernel_walks; /* the LUT's samples whose kernel stack was walked */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nq_sampler_cost);
} sampler_cost SEC(".maps");

/* A sample's kernel stack id when the kernel stack was not walked: no frames, not a collision. */
#define NQ_KERNEL_NOT_WALKED (-2) /* -ENOENT */

/* One sample of the current task: counts its (user stack, kernel stack) pair if it is a LUT's.
 * `ctx` is the calling program's context (bpf_get_stackid reads the registers from it).
 * `walk_kernel`: 0 when the kernel stack is known to hold only the sampler's own path. */
static __always_inline int count_sample(void *ctx, int walk_kernel)
{
	__u32 zero = 0;
	struct nq_sampler_cost *cost = bpf_map_lookup_elem(&sampler_cost, &zero);
	if (cost)
		cost->ticks += 1;
	__u32 *role = role_of_current();
	if (!role)
		return 0;
	__u64 start = bpf_ktime_get_ns();
	int inserted = 0;
	struct nq_sample_key key = {
		.tgid = bpf_get_current_pid_tgid() >> 32,
		.role = *role,
		.user_stack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK),
		.kernel_stack = walk_kernel ? bpf_get_stackid(ctx, &stacks, 0) : NQ_KERNEL_NOT_WALKED,
	};
	/* -EEXIST: the stack's hash bucket holds another stack. Not replaced (BPF_F_REUSE_STACKID
	 * would relabel the samples already counted under that id): counted, and the user leaf kept. */
	int user_lost = key.user_stack < 0;
	if (key.user_stack == -NQ_EEXIST || key.kernel_stack == -NQ_EEXIST) {
		struct nq_health *h = health_slot();
		if (h)
			h->stack_collisions += (key.user_stack == -NQ_EEXIST) + (key.kernel_stack == -NQ_EEXIST);
	}
	key.sp_word = user_word(user_lost);
	__u64 one = 1;
	__u64 *count = bpf_map_lookup_elem(&samples, &key);
	if (count)
		__sync_fetch_and_add(count, 1);
	else if (bpf_map_update_elem(&samples, &key, &one, BPF_NOEXIST) != 0) {
		/* Raced with another CPU inserting it, or the map is full. */
		count = bpf_map_lookup_elem(&samples, &key);
		if (count)
			__sync_fetch_and_add(count, 1);
		else {
			struct nq_health *h = health_slot();
			if (h)
				h->events_dropped += 1;
		}
	} else
		inserted = 1;
	if (cost) {
		__u64 ns = bpf_ktime_get_ns() - start;
		cost->kernel_walks += walk_kernel != 0;
		if (inserted) {
			cost->inserts += 1;
			cost->insert_ns += ns;
		} else {
			cost->samples += 1;
			cost->sample_ns += ns;
		}
	}
	return 0;
}

/* Runs on every CPU-clock event (per CPU, at the sampling frequency): `profile:HZ`. */
SEC("perf_event")
int nq_sample(struct bpf_perf_event_data *ctx)
{
	/* The kernel stack starts at the interrupted context: empty, and free, in user mode. */
	return count_sample(ctx, 1);
}

/* tick_function[NQ_TICK_CALLBACK]: the scheduler tick's hrtimer callback (tick_nohz_handler;
 * tick_sched_timer before 6.10), from /proc/kallsyms. tick_function[NQ_TICK_WALK_ALWAYS]: 1 to walk
 * the kernel stack of every sample, also of ticks that interrupted user code (set while kernel
 * uprobes are attached: see tick_hit_user_code). */
#define NQ_TICK_CALLBACK 0
#define NQ_TICK_WALK_ALWAYS 1
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} tick_function SEC(".maps");

/* Whether the tick interrupted the task in user mode, so that its kernel stack is only the tick's
 * own interrupt path (which user space strips anyway). The kernel-stack walk (ORC, from inside the
 * tick's hrtimer) is most of a sample's time: ~9 of ~13 us on msquic, 16-25 us when the tick hit
 * kernel code. A user-mode tick skips it (a third less program time on msquic; the kernel-mode
 * walks, which classifying kernel time needs, are the ones that cost it end to end:
 * docs/probe-overhead.md).
 * How: an interrupt or exception from user mode saves the user registers at the top of the task's
 * kernel stack (task_pt_regs) with orig_ax = -1 (an interrupt, or an exception without an error
 * code); a system call saves its number there and an exception with an error code the code, both
 * >= 0. So orig_ax == -1 there means the task entered the kernel through an interrupt, and is in
 * it only for that interrupt: this tick's, in all but the rare case of the tick nesting into kernel
 * work done on the way out of another interrupt from user mode (softirqs with interrupts on,
 * exit-to-user work). One such case is not rare: a kernel uprobe's int3 (an exception without
 * an error code) runs its handlers on the way out, so with uprobes attached every tick walks. */
static __always_inline int tick_hit_user_code(void)
{
	struct pt_regs *user = user_regs(bpf_get_current_task_btf());
	return user && (long)user->orig_ax == -1;
}

/* `profile:tick`: samples on the scheduler tick, which interrupts every busy CPU HZ times a second
 * anyway, instead of on a timer of our own. In a VM an extra timer interrupt is the sampler's main
 * cost: `perf record -F 9999 -a` without call chains took 16% of a UDP loop's CPU (~16 us a
 * sample), while the program itself runs ~4 us (bench/sampler-floor.md). The kernel stack then
 * starts with the timer interrupt's own frames; user space strips them (session.rs). */
SEC("tp_btf/hrtimer_expire_entry")
int nq_tick_sample(__u64 *ctx)
{
	struct hrtimer *timer = (struct hrtimer *)ctx[0];
	__u32 callback = NQ_TICK_CALLBACK, walk_always = NQ_TICK_WALK_ALWAYS;
	__u64 *tick = bpf_map_lookup_elem(&tick_function, &callback);
	if (!tick || (__u64)BPF_CORE_READ(timer, function) != *tick)
		return 0;
	__u64 *always = bpf_map_lookup_elem(&tick_function, &walk_always);
	return count_sample(ctx, (always && *always) || !tick_hit_user_code());
}

/* ---- link impairment: random loss on a veth's egress, for kernels without netem ---- */

#define NQ_TC_ACT_OK 0
#define NQ_TC_ACT_SHOT 2
#define NQ_ETH_P_IP 0x0800

/* Drop probability in parts per million (index 0). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} loss_config SEC(".maps");

/* What was applied, measured: index 0/1 datagrams passed/dropped, 2/3 packets (skbs) passed/
 * dropped. A UDP GSO batch crosses a veth as one skb; dropping it drops all its datagrams (a
 * burst), so the datagram figures are the loss the stack saw. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} loss_stats SEC(".maps");

SEC("classifier")
int nq_tc_loss(struct __sk_buff *skb)
{
	/* Only IPv4 (the benchmark's traffic); ARP and the rest pass untouched. */
	if (skb->protocol != bpf_htons(NQ_ETH_P_IP))
		return NQ_TC_ACT_OK;
	__u32 zero = 0;
	__u32 *ppm = bpf_map_lookup_elem(&loss_config, &zero);
	__u32 drop = ppm && (bpf_get_prandom_u32() % 1000000) < *ppm;
	__u32 segs = skb->gso_segs ? skb->gso_segs : 1;
	__u64 *n = bpf_map_lookup_elem(&loss_stats, &drop);
	if (n)
		*n += segs;
	__u32 skb_idx = 2 + drop;
	__u64 *p = bpf_map_lookup_elem(&loss_stats, &skb_idx);
	if (p)
		*p += 1;
	return drop ? NQ_TC_ACT_SHOT : NQ_TC_ACT_OK;
}
