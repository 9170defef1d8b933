//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
//
// Uprobes on CPython's GIL and GC functions. Each probe keeps a little state
// per thread and, when a window closes, either sends it to user space through
// the ring buffer (windows at least min_duration_ns long) or adds it to
// per-thread counts and sums (shorter ones), so that a thread releasing the
// GIL hundreds of thousands of times a second does not flood the ring buffer.
//
// Windows are measured with bpf_ktime_get_ns (CLOCK_MONOTONIC); user space
// maps them to Unix time.

#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// Window kinds; user space has the same numbers (probe.go).
enum kind {
	KIND_RELEASED = 0, // PyEval_SaveThread -> PyEval_RestoreThread
	KIND_WAIT = 1,     // waiting to take the GIL
	KIND_GC = 2,       // gc_collect_main entry -> return, or USDT gc__start -> gc__done
	KIND_HELD = 3,     // take_gil return -> drop_gil (aggregate only)
	KIND_SWITCH = 4,   // forced drops by the switch interval (count only)
};

// Why a thread waited.
enum cause {
	CAUSE_UNKNOWN = 0,
	CAUSE_RESTORE = 1, // PyEval_RestoreThread / PyEval_AcquireThread
	CAUSE_ENSURE = 2,  // inside PyGILState_Ensure
	CAUSE_SWITCH = 3,  // dropped by the switch interval
};

// Indexes into the counters array.
enum counter {
	COUNTER_RINGBUF_FULL = 0, // window aggregated because the ring buffer was full
	COUNTER_AGG_FULL = 1,     // window lost because the aggregate map was full
	COUNTER_STALE = 2,        // window discarded: it began before the current attach
	COUNTER_HITS = 3,         // probe hits, for the overhead budget
	COUNTER_MAX = 4,
};

struct event {
	__u64 start;
	__u64 duration;
	__u32 pid;
	__u32 tid;
	__u8 kind;
	__u8 cause;
	__u8 generation;
	__u8 _pad[5];
};

// Referenced so that the type reaches BTF and bpf2go generates it.
const struct event *unused_event __attribute__((unused));

struct agg_key {
	__u32 pid;
	__u32 tid;
	__u32 kind;
};

struct agg_value {
	__u64 count;
	__u64 sum;
};

struct thread {
	__u64 released_at;
	__u64 wait_at;
	__u64 held_at;
	__u64 gc_at;
	__u8 wait_cause;
	__u8 in_save;
	__u8 in_restore;
	__u8 in_ensure;
	__u8 gc_generation;
	__u8 _pad[3];
};

// Set by user space before loading.
volatile const __u64 min_duration_ns = 100000;
volatile const __u8 filter_pids = 0;

// attached_since is when the probes were last attached (bpf_ktime_get_ns),
// set by user space through the control map: state recorded before it may
// have lost its closing probe during a detached period and is discarded.
struct control {
	__u64 attached_since;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct control);
} control_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct agg_key);
	__type(value, struct agg_value);
} aggregates SEC(".maps");

// pids selected by user space when filter_pids is set.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &which);
	if (v)
		(*v)++;
}

// current returns the calling thread's state, creating it, or NULL when the
// process is not selected.
static __always_inline struct thread *current(__u32 *pid, __u32 *tid)
{
	__u64 id = bpf_get_current_pid_tgid();
	*pid = id >> 32;
	*tid = (__u32)id;
	count(COUNTER_HITS);
	if (filter_pids && !bpf_map_lookup_elem(&pids, pid))
		return 0;
	struct thread *t = bpf_map_lookup_elem(&threads, tid);
	if (t)
		return t;
	struct thread zero = {};
	bpf_map_update_elem(&threads, tid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&threads, tid);
}

// valid reports whether a window that began at start was seen whole.
static __always_inline int valid(__u64 start)
{
	if (!start)
		return 0;
	__u32 zero = 0;
	struct control *c = bpf_map_lookup_elem(&control_map, &zero);
	if (c && start < c->attached_since) {
		count(COUNTER_STALE);
		return 0;
	}
	return 1;
}

static __always_inline void aggregate(__u32 pid, __u32 tid, __u32 kind, __u64 duration)
{
	struct agg_key key = {.pid = pid, .tid = tid, .kind = kind};
	struct agg_value *v = bpf_map_lookup_elem(&aggregates, &key);
	if (!v) {
		struct agg_value zero = {};
		bpf_map_update_elem(&aggregates, &key, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&aggregates, &key);
		if (!v) {
			count(COUNTER_AGG_FULL);
			return;
		}
	}
	__sync_fetch_and_add(&v->count, 1);
	__sync_fetch_and_add(&v->sum, duration);
}

static __always_inline void emit(__u32 pid, __u32 tid, __u8 kind, __u8 cause, __u8 generation, __u64 start, __u64 end)
{
	__u64 duration = end - start;
	if (duration < min_duration_ns) {
		aggregate(pid, tid, kind, duration);
		return;
	}
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		// Keep the totals right even when the window itself is lost.
		count(COUNTER_RINGBUF_FULL);
		aggregate(pid, tid, kind, duration);
		return;
	}
	e->start = start;
	e->duration = duration;
	e->pid = pid;
	e->tid = tid;
	e->kind = kind;
	e->cause = cause;
	e->generation = generation;
	__builtin_memset(e->_pad, 0, sizeof(e->_pad));
	bpf_ringbuf_submit(e, 0);
}

// The thread is about to run without the GIL.
static __always_inline int save_thread(struct pt_regs *ctx)
{
	__u32 pid, tid;
	struct thread *t = current(&pid, &tid);
	if (!t)
		return 0;
	t->released_at = bpf_ktime_get_ns();
	t->in_save = 1;
	return 0;
}

// The thread is back from native code and asks for the GIL.
static __always_inline int restore_thread(struct pt_regs *ctx)
{
	__u32 pid, tid;
	struct thread *t = current(&pid, &tid);
	if (!t)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (valid(t->released_at))
		emit(pid, tid, KIND_RELEASED, 0, 0, t->released_at, now);
	t->released_at = 0;
	t->in_save = 0;
	t->wait_at = now;
	t->wait_cause = t->in_ensure ? CAUSE_ENSURE : CAUSE_RESTORE;
	t->in_restore = 1;
	return 0;
}

// PyEval_RestoreThread returned: the thread holds the GIL. Attached only
// when take_gil cannot be probed.
static __always_inline int restore_thread_return(struct pt_regs *ctx)
{
	__u32 pid, tid;
	struct thread *t = current(&pid, &tid);
	if (!t)
		return 0;
	if (valid(t->wait_at))
		emit(pid, tid, KIND_WAIT, t->wait_cause, 0, t->wait_at, bpf_ktime_get_ns());
	t->wait_at = 0;
	t->in_restore = 0;
	return 0;
}

static __always_inline int gilstate_ensure(struct pt_regs *ctx)
{
	__u32 pid, tid;
	struct thread *t = current(&pid, &tid);
	if (t)
		t->in_ensure = 1;
	return 0;
}

static __always_inline int gilstate_ensure_return(struct pt_regs *ctx)
{
	__u32 pid, tid;
	struct thread *t = current(&pid, &tid);
	if (t)
		t->in_ensure = 0;
	return 0;
}

// drop_gil: the GIL is let go, voluntarily (inside PyEval_SaveThread) or
// forced by the switch interval.
static __always_inline int drop_gil(struct pt_regs *ctx)
{
	__u32 pid, tid;
	struct thread *t = current(&pid, &tid);
	if (!t)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (valid(t->held_at))
		aggregate(pid, tid, KIND_HELD, now - t->held_at);
	t->held_at = 0;
	if (t->in_save) {
		t->in_save = 0;
		return 0;
	}
	if (t->in_restore)
		return 0;
	// Forced (or the thread is exiting): the thread may want to go on
	// running; its wait starts now. It counts as a switch once take_gil
	// follows, which an exiting thread never calls.
	t->wait_at = now;
	t->wait_cause = CAUSE_SWITCH;
	return 0;
}

static __always_inline int take_gil(struct pt_regs *ctx)
{
	__u32 pid, tid;
	struct thread *t = current(&pid, &tid);
	if (!t)
		return 0;
	if (t->wait_at && t->wait_cause == CAUSE_SWITCH) {
		aggregate(pid, tid, KIND_SWITCH, 0);
		return 0;
	}
	t->wait_at = bpf_ktime_get_ns();
	if (!t->in_restore)
		t->wait_cause = CAUSE_UNKNOWN;
	return 0;
}

static __always_inline int take_gil_return(struct pt_regs *ctx)
{
	__u32 pid, tid;
	struct thread *t = current(&pid, &tid);
	if (!t)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (valid(t->wait_at))
		emit(pid, tid, KIND_WAIT, t->wait_cause, 0, t->wait_at, now);
	t->wait_at = 0;
	t->in_restore = 0;
	t->held_at = now;
	return 0;
}

static __always_inline int gc_collect(struct pt_regs *ctx)
{
	__u32 pid, tid;
	struct thread *t = current(&pid, &tid);
	if (!t)
		return 0;
	t->gc_at = bpf_ktime_get_ns();
	t->gc_generation = (__u8)PT_REGS_PARM2(ctx);
	return 0;
}

// USDT argument locations, in bits 8-15 of the cookie (probe.go's
// usdtCookie): bits 16-23 hold the register's index in struct pt_regs,
// 24-31 the size in bytes, 32-63 the constant or the displacement.
enum arg_loc {
	ARG_CONSTANT = 1,
	ARG_REGISTER = 2,
	ARG_MEMORY = 3,
};

// The registers a USDT argument can name, in the order of the probe's
// context: x86-64's struct pt_regs, or arm64's user_pt_regs (x0-x30, sp, pc,
// pstate), the start of the kernel's arm64 pt_regs.
#if defined(__TARGET_ARCH_arm64)
#define CTX_REGS (sizeof(struct user_pt_regs) / sizeof(__u64))
#else
#define CTX_REGS (sizeof(struct pt_regs) / sizeof(__u64))
#endif

// usdt_arg reads the USDT argument the cookie describes; 0 when it cannot.
static __always_inline __u64 usdt_arg(struct pt_regs *ctx, __u64 cookie)
{
	__u8 loc = cookie >> 8;
	__u32 reg = (cookie >> 16) & 0xff;
	__u8 size = cookie >> 24;
	__s64 off = (__s32)(cookie >> 32);
	__u64 v = 0;
	if (loc == ARG_CONSTANT)
		return off;
	if (reg >= CTX_REGS)
		return 0;
	if (bpf_probe_read_kernel(&v, sizeof(v), (void *)ctx + reg * sizeof(__u64)))
		return 0;
	if (loc == ARG_MEMORY) {
		__u64 addr = v + off;
		v = 0;
		if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
			return 0;
	}
	switch (size) {
	case 1:
		return v & 0xff;
	case 2:
		return v & 0xffff;
	case 4:
		return v & 0xffffffff;
	}
	return v;
}

// The gc__start USDT probe: the collection begins; its first argument is
// the generation.
static __always_inline int gc_start_usdt(struct pt_regs *ctx, __u64 cookie)
{
	__u32 pid, tid;
	struct thread *t = current(&pid, &tid);
	if (!t)
		return 0;
	t->gc_at = bpf_ktime_get_ns();
	t->gc_generation = (__u8)usdt_arg(ctx, cookie);
	return 0;
}

static __always_inline int gc_collect_return(struct pt_regs *ctx)
{
	__u32 pid, tid;
	struct thread *t = current(&pid, &tid);
	if (!t)
		return 0;
	if (valid(t->gc_at))
		emit(pid, tid, KIND_GC, 0, t->gc_generation, t->gc_at, bpf_ktime_get_ns());
	t->gc_at = 0;
	return 0;
}

// Probe points, passed as the attach cookie (probe.go has the same numbers):
// one program serves every entry and one every return, so that a library
// needs two uprobe-multi links, not one link per symbol (closing each link
// costs an RCU grace period).
enum point {
	POINT_SAVE = 1,    // PyEval_SaveThread, PyEval_ReleaseThread
	POINT_RESTORE = 2, // PyEval_RestoreThread, PyEval_AcquireThread
	POINT_ENSURE = 3,  // PyGILState_Ensure
	POINT_DROP = 4,    // drop_gil
	POINT_TAKE = 5,    // take_gil
	POINT_GC = 6,      // gc_collect_main
	POINT_GC_START_USDT = 7, // USDT python:gc__start (entry only)
	POINT_GC_DONE_USDT = 8,  // USDT python:gc__done (entry only)
};

// The point is the cookie's low byte; USDT points carry their argument's
// location above it.
static __always_inline int on_entry(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	switch (cookie & 0xff) {
	case POINT_SAVE:
		return save_thread(ctx);
	case POINT_RESTORE:
		return restore_thread(ctx);
	case POINT_ENSURE:
		return gilstate_ensure(ctx);
	case POINT_DROP:
		return drop_gil(ctx);
	case POINT_TAKE:
		return take_gil(ctx);
	case POINT_GC:
		return gc_collect(ctx);
	case POINT_GC_START_USDT:
		return gc_start_usdt(ctx, cookie);
	case POINT_GC_DONE_USDT:
		return gc_collect_return(ctx);
	}
	return 0;
}

static __always_inline int on_return(struct pt_regs *ctx)
{
	switch (bpf_get_attach_cookie(ctx) & 0xff) {
	case POINT_RESTORE:
		return restore_thread_return(ctx);
	case POINT_ENSURE:
		return gilstate_ensure_return(ctx);
	case POINT_TAKE:
		return take_gil_return(ctx);
	case POINT_GC:
		return gc_collect_return(ctx);
	}
	return 0;
}

// Programs for uprobe-multi links (kernel 6.6+) and for one-link-per-symbol
// uprobes (older kernels); the same code behind both.
SEC("uprobe.multi")
int entry_multi(struct pt_regs *ctx) { return on_entry(ctx); }

SEC("uretprobe.multi")
int return_multi(struct pt_regs *ctx) { return on_return(ctx); }

SEC("uprobe")
int entry_single(struct pt_regs *ctx) { return on_entry(ctx); }

SEC("uretprobe")
int return_single(struct pt_regs *ctx) { return on_return(ctx); }

// count_hit is the "bare probe" of the overhead benchmark: it only counts.
SEC("uprobe.multi")
int count_multi(struct pt_regs *ctx)
{
	count(COUNTER_HITS);
	return 0;
}

SEC("uprobe")
int count_single(struct pt_regs *ctx)
{
	count(COUNTER_HITS);
	return 0;
}

SEC("uretprobe.multi")
int count_return_multi(struct pt_regs *ctx)
{
	count(COUNTER_HITS);
	return 0;
}

SEC("uretprobe")
int count_return_single(struct pt_regs *ctx)
{
	count(COUNTER_HITS);
	return 0;
}
