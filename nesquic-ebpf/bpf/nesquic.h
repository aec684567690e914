/* Layouts shared by the eBPF programs and the Rust loader (mirrored in src/layout.rs, whose tests
 * check the sizes). Only fixed-size integer fields: no implicit padding. */
#ifndef NESQUIC_H
#define NESQUIC_H

#define NQ_MAX_ROLES 4
/* Bucket b counts durations with floor(log2(ns)) == b; bucket 0 also holds 0 ns. */
#define NQ_HIST_BUCKETS 40
#define NQ_MAX_FUNCS 256
/* Messages of one sendmmsg/recvmmsg whose GSO/GRO control data is parsed; larger batches are
 * counted in nq_health.truncated_batches (their calls and bytes stay exact). */
#define NQ_MAX_BATCH 64
#define NQ_MAX_CMSGS 4

/* The socket calls (first six) and the file calls that move bytes on a socket when given one
 * (write, writev, sendfile's out_fd, read, readv: counted only on IPv4/IPv6 sockets). */
enum nq_syscall {
	NQ_SENDMSG = 0,
	NQ_SENDMMSG = 1,
	NQ_SENDTO = 2,
	NQ_RECVMSG = 3,
	NQ_RECVMMSG = 4,
	NQ_RECVFROM = 5,
	NQ_WRITE = 6,
	NQ_WRITEV = 7,
	NQ_SENDFILE = 8,
	NQ_READ = 9,
	NQ_READV = 10,
	NQ_SYSCALLS = 11,
};

/* Kernel functions of the UDP path, timed by fentry/fexit or kprobe/kretprobe where the kernel
 * allows either (src/kernel_io.rs names them; the order is the map index). */
enum nq_kfunc {
	NQ_K_UDP_SENDMSG = 0,
	NQ_K_UDP_RECVMSG = 1,
	NQ_K_UDP_GSO_SEGMENT = 2,
	NQ_K_UDP_GRO_RECEIVE = 3,
	NQ_K_IP_OUTPUT = 4,
	NQ_K_DEV_XMIT = 5,
	NQ_K_COPY_FROM_USER = 6,
	NQ_K_COPY_TO_USER = 7,
	NQ_KFUNCS = 8,
};

/* One (role, syscall) or (role, function) aggregate, per CPU. */
struct nq_stats {
	__u64 calls;
	__u64 errors;     /* failed calls other than EAGAIN */
	__u64 eagain;     /* EAGAIN/EWOULDBLOCK */
	__u64 bytes;      /* syscalls: moved; functions: from the configured argument */
	__u64 datagrams;  /* syscalls only: GSO sends split by segment size, GRO receives by stride */
	__u64 messages;   /* syscalls only: messages (msghdrs) moved; sendmmsg/recvmmsg move several */
	__u64 segmented;  /* syscalls only: messages carrying more than one datagram (GSO/GRO used) */
	__u64 total_ns;
	__u64 hist[NQ_HIST_BUCKETS];
};

/* Per-function settings, indexed by the attach cookie. */
struct nq_func_config {
	__u32 bytes_arg;  /* 1-6: argument register, 7-8: stack argument, holding a byte count; 0: none */
	__u32 count_only; /* 1: no return probe; the entry probe counts calls and bytes itself */
};

/* What could not be measured, per CPU: printed with every report, never hidden. */
struct nq_health {
	__u64 inflight_full;       /* entry not recorded: in-flight map full */
	__u64 exit_without_entry;  /* return seen without its entry (attached mid-call, or nesting) */
	__u64 nested_overwrites;   /* a function re-entered before returning: outer call lost */
	__u64 user_read_failures;  /* user memory (msghdr, cmsg) could not be read */
	__u64 truncated_batches;   /* mmsg batch larger than NQ_MAX_BATCH: datagrams partly counted */
	__u64 events_dropped;      /* per-batch events (--qlog-datagrams) the ring buffer had no room for */
	__u64 stack_collisions;    /* sampled stacks lost to a stack-map bucket holding another (-EEXIST) */
};

/* One message of a send/receive syscall, emitted only when nq_settings.datagram_events is set. */
struct nq_datagram_event {
	__u64 ts_ns;      /* CLOCK_MONOTONIC at syscall exit */
	__u64 bytes;      /* bytes of this message */
	__u32 role;
	__u32 kind;       /* enum nq_syscall */
	__u32 datagrams;  /* datagrams in this message */
	__u32 segment;    /* datagram size (GSO segment / GRO stride); the last may be shorter */
};

/* CPU-clock samples of LUT processes, counted per (process, stacks). */
struct nq_sample_key {
	__u32 tgid;
	__u32 role;
	__s32 user_stack;   /* id in the stacks map, < 0: none */
	__s32 kernel_stack;
	/* The word at the user stack pointer when sampled (0: unreadable). A leaf that pushes no
	 * frame (glibc's memcpy, syscall wrappers) keeps its return address there, which the
	 * frame-pointer walk skips: user space inserts it when the leaf is frameless.
	 * When user_stack < 0 (lost to a collision): the user leaf's instruction pointer. */
	__u64 sp_word;
};

struct nq_settings {
	__u32 datagram_events;  /* 1: emit an nq_datagram_event per message */
	__u32 functions_paused; /* 1: function probes record nothing new (duty cycle: between windows) */
	__u64 window_start_ns;  /* duty cycle: calls that entered before this (CLOCK_MONOTONIC) are stale */
};

/* Sizes the Rust mirror asserts too (src/layout.rs). */
_Static_assert(sizeof(struct nq_stats) == 384, "nq_stats layout changed: update src/layout.rs");
_Static_assert(sizeof(struct nq_func_config) == 8, "nq_func_config layout changed");
_Static_assert(sizeof(struct nq_health) == 56, "nq_health layout changed");
_Static_assert(sizeof(struct nq_datagram_event) == 32, "nq_datagram_event layout changed");
_Static_assert(sizeof(struct nq_settings) == 16, "nq_settings layout changed");
_Static_assert(sizeof(struct nq_sample_key) == 24, "nq_sample_key layout changed");

#endif
