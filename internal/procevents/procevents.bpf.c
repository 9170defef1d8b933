//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
//
// Process exec and exit, from the sched_process_exec and sched_process_exit
// raw tracepoints (raw, so that attaching needs no tracefs mount). Only what
// user space needs crosses the ring buffer: the thread group id, the kind and
// the command name. Exits of threads other than the last are filtered here:
// a JVM with 200 threads exits once, not 200 times.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// Event kinds; user space has the same numbers (procevents.go).
enum kind {
	KIND_EXEC = 1,
	KIND_EXIT = 2,
};

struct event {
	__u32 pid;
	__u32 kind;
	char comm[16];
};

// Referenced so that the type reaches BTF and bpf2go generates it.
const struct event *unused_event __attribute__((unused));

// Indexes into the counters array.
enum counter {
	COUNTER_LOST = 0, // events dropped because the ring buffer was full
	COUNTER_MAX = 1,
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 which) {
	__u64 *v = bpf_map_lookup_elem(&counters, &which);
	if (v)
		*v += 1;
}

static __always_inline void send(__u32 pid, __u32 kind) {
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(COUNTER_LOST);
		return;
	}
	e->pid = pid;
	e->kind = kind;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
}

SEC("raw_tracepoint/sched_process_exec")
int on_exec(void *ctx) {
	send(bpf_get_current_pid_tgid() >> 32, KIND_EXEC);
	return 0;
}

// The tracepoint fires for every exiting thread; only the thread group
// leader's exit (pid == tgid) is sent. A leader that ends before its other
// threads (pthread_exit in main) is reported early; the receivers' scans
// correct that rare case.
SEC("raw_tracepoint/sched_process_exit")
int on_exit(void *ctx) {
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if ((__u32)id != tgid)
		return 0;
	send(tgid, KIND_EXIT);
	return 0;
}
