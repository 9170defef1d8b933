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
	KIND_MAX = 5,
};

// CPython's GC generations: short pauses are summed per generation.
#define GC_GENERATIONS 3

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
	COUNTER_AGG_FULL = 1,     // thread not tracked because the thread map was full
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
	// flags: EVENT_CONTINUES on a wait that goes on from the end of the
	// thread's previous wait (sent at a wake-up that found the GIL free,
	// before another thread took it first).
	__u8 flags;
	__u8 _pad[4];
};

#define EVENT_CONTINUES 1

// Referenced so that the types reach BTF and bpf2go generates them.
const struct event *unused_event __attribute__((unused));
const struct thread *unused_thread __attribute__((unused));
const struct gil_info *unused_gil_info __attribute__((unused));

struct agg_value {
	__u64 count;
	__u64 sum;
};

// A thread's state and its short windows' counts and sums, in one map entry
// keyed by tid, so that a hit costs one hash lookup: only the thread itself
// writes its entry (no atomics); user space iterates the map to read the
// sums (Aggregates) and deletes a process's entries once it has exited
// (Forget).
struct thread {
	__u32 pid;
	__u32 _pad0;
	struct agg_value agg[KIND_MAX];
	// Short GC pauses by generation (agg[KIND_GC] has those of a
	// generation out of range).
	struct agg_value gc_agg[GC_GENERATIONS];
	// Futex mechanism: the GIL this thread blocks on (its base address),
	// whether it is blocked now.
	__u64 futex_gil;
	// woke_at: when the blocked thread last left a futex wait with the GIL
	// still taken; if its next GIL event is not another wait, it took the
	// GIL then.
	__u64 woke_at;
	// woke_switch: the GIL's switch_number at that wake-up (~0 when it
	// could not be read).
	__u64 woke_switch;
	// taken_at: when the thread last left a GIL futex wait with the GIL
	// free, its wait then sent; taken_blocked is what blocked was. If it
	// blocks on the GIL's cond again soon after, with no release between,
	// another thread took the GIL first: it waits on.
	__u64 taken_at;
	__u8 blocked;
	// in_gil_futex: inside a futex wait on a GIL word now.
	__u8 in_gil_futex;
	__u8 taken_blocked;
	// wait_continues: the wait under way began where the thread's
	// previous one, already sent, ended (EVENT_CONTINUES).
	__u8 wait_continues;
	// on_switch: its last GIL futex wait was on switch_cond or
	// switch_mutex (forced off), not on the cond or the mutex (asking).
	__u8 on_switch;
	// on_mutex: its last GIL futex wait was on the mutex.
	__u8 on_mutex;
	__u8 _pad1[2];
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
// futex_waits: waits come from the futex syscalls of threads blocked on
// the GIL (sys_enter_futex/sys_exit_futex tracepoints) instead of
// take_gil's or PyEval_RestoreThread's return; held time is derived from
// the windows around it.
volatile const __u8 futex_waits = 0;

// struct _gil_runtime_state of CPython 3.9-3.13 (default builds): interval
// (unsigned long), last_holder, locked (int), switch_number, then cond,
// mutex, switch_cond, switch_mutex (pthread types, 48 + 40 + 48 + 40 bytes
// on x86-64 glibc, 48 + 48 + 48 + 48 on arm64).
#define GIL_LOCKED 16
#define GIL_SWITCH_NUMBER 24
#define GIL_COND 32
#if defined(__TARGET_ARCH_arm64)
#define GIL_MUTEX 80
#define GIL_SWITCH_COND 128
#define GIL_END 224
#else
#define GIL_MUTEX 80
#define GIL_SWITCH_COND 120
#define GIL_END 208
#endif

// glibc's pthread_cond_t: waiters block on __g_signals (40-47 bytes in); a
// thread signalling the cond may block on __g_refs (16-23 bytes in) until
// the waiters it woke have left. In drop_gil that is the thread letting go
// of the GIL (cond), in take_gil the thread that took it waking the one it
// forced off (switch_cond): both held the GIL, neither waits for it.
#define COND_REFS 16
#define COND_REFS_END 24
// __g_signals, the words waiters block on and signallers wake.
#define COND_SIGNALS 40
#define COND_SIGNALS_END 48

static __always_inline int signalling(__u64 base, __u64 uaddr)
{
	__u64 off = uaddr - base;
	return (off >= GIL_COND + COND_REFS && off < GIL_COND + COND_REFS_END) ||
	       (off >= GIL_SWITCH_COND + COND_REFS && off < GIL_SWITCH_COND + COND_REFS_END);
}

// thread.blocked: not blocked, blocked in a wait that began at a uprobe,
// blocked in a wait that began at the tracepoint.
#define BLOCKED 1
#define BLOCKED_SEEN 2

// What was learned of one process's GIL: where it is, and the switch
// interval read there (µs), which user space compares with the
// interpreter's.
struct gil_info {
	__u64 base;
	__u64 interval;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct gil_info);
} gils SEC(".maps");

// Where a process's GIL can be, set by user space when it starts probing
// the process: the interpreter file's writable mappings and the bss after
// them (the main interpreter's GIL is static data of libpython, or of a
// static python executable, on 3.9-3.13). Until the GIL is known, a futex
// wait there is checked as a GIL (learn), so the GIL is learned from any
// thread blocking on it, not only from one the uprobes saw ask for it.
struct data_range {
	__u64 lo;
	__u64 hi;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct data_range);
} data_ranges SEC(".maps");

// attached_since is when the probes were last attached (bpf_ktime_get_ns),
// set by user space through the control map: state recorded before it may
// have lost its closing probe during a detached period and is discarded.
// active is 0 while the uprobes are detached (duty cycling); the futex
// tracepoints stay attached and then time waits from their own start.
struct control {
	__u64 attached_since;
	__u64 active;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct control);
} control_map SEC(".maps");

// detached_pids are the processes whose library's uprobes user space
// detached while other libraries' stay attached (the budget following
// attention): their threads are treated as while every uprobe is detached.
// Emptied whenever every library is attached again.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} detached_pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct thread);
} threads SEC(".maps");

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
// process is not selected. A thread with an entry was selected when the
// entry was made (Forget deletes a process's entries), so the pid filter is
// consulted only for a thread seen the first time.
static __always_inline struct thread *current(__u32 *pid, __u32 *tid)
{
	__u64 id = bpf_get_current_pid_tgid();
	*pid = id >> 32;
	*tid = (__u32)id;
	count(COUNTER_HITS);
	struct thread *t = bpf_map_lookup_elem(&threads, tid);
	if (t && t->pid == *pid)
		return t;
	if (filter_pids && !bpf_map_lookup_elem(&pids, pid))
		return 0;
	// New, or a tid reused by another process: start afresh.
	struct thread zero = {.pid = *pid};
	if (bpf_map_update_elem(&threads, tid, &zero, BPF_ANY)) {
		count(COUNTER_AGG_FULL);
		return 0;
	}
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

// uprobes_active reports whether pid's uprobes are attached now.
static __always_inline int uprobes_active(__u32 pid)
{
	__u32 zero = 0;
	struct control *c = bpf_map_lookup_elem(&control_map, &zero);
	if (c && !c->active)
		return 0;
	return !bpf_map_lookup_elem(&detached_pids, &pid);
}

static __always_inline void aggregate(struct thread *t, __u32 kind, __u64 duration)
{
	if (kind >= KIND_MAX)
		return;
	t->agg[kind].count++;
	t->agg[kind].sum += duration;
}

// aggregate_gen sums a short window, a GC pause under its generation.
static __always_inline void aggregate_gen(struct thread *t, __u32 kind, __u8 generation, __u64 duration)
{
	if (kind == KIND_GC && generation < GC_GENERATIONS) {
		t->gc_agg[generation].count++;
		t->gc_agg[generation].sum += duration;
		return;
	}
	aggregate(t, kind, duration);
}

static __always_inline void emit(struct thread *t, __u32 pid, __u32 tid, __u8 kind, __u8 cause, __u8 generation, __u8 flags, __u64 start, __u64 end)
{
	__u64 duration = end - start;
	if (duration < min_duration_ns) {
		aggregate_gen(t, kind, generation, duration);
		return;
	}
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		// Keep the totals right even when the window itself is lost.
		count(COUNTER_RINGBUF_FULL);
		aggregate_gen(t, kind, generation, duration);
		return;
	}
	e->start = start;
	e->duration = duration;
	e->pid = pid;
	e->tid = tid;
	e->kind = kind;
	e->cause = cause;
	e->generation = generation;
	e->flags = flags;
	__builtin_memset(e->_pad, 0, sizeof(e->_pad));
	bpf_ringbuf_submit(e, 0);
}

// settle ends the wait of a thread still marked blocked: it took the GIL
// when it last woke. That is known at the wake-up when the GIL is free then
// (futex_exit), or else when the thread next does something that needs the
// GIL (releases it, or asks for it again). Both ends of a futex wait are
// seen by the tracepoints, or its start by a uprobe just before the thread
// blocked (BLOCKED), so a wait stays whole across a detach of the uprobes.
static __always_inline void settle(struct thread *t, __u32 pid, __u32 tid)
{
	if (!t->blocked)
		return;
	if (t->woke_at && t->wait_at && t->woke_at >= t->wait_at) {
		if (t->wait_continues && t->woke_at - t->wait_at < min_duration_ns)
			// The short rest of a wait already sent: its time, not
			// another wait.
			t->agg[KIND_WAIT].sum += t->woke_at - t->wait_at;
		else
			emit(t, pid, tid, KIND_WAIT, t->wait_cause, 0, t->wait_continues ? EVENT_CONTINUES : 0, t->wait_at, t->woke_at);
		t->held_at = t->woke_at;
	}
	t->blocked = 0;
	t->woke_at = 0;
	t->wait_at = 0;
	t->wait_continues = 0;
	t->in_restore = 0;
}

// The thread is about to run without the GIL.
static __always_inline int save_thread(struct pt_regs *ctx)
{
	__u32 pid, tid;
	struct thread *t = current(&pid, &tid);
	if (!t)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	t->released_at = now;
	t->in_save = 1;
	if (futex_waits) {
		settle(t, pid, tid);
		t->taken_at = 0;
		if (valid(t->held_at))
			aggregate(t, KIND_HELD, now - t->held_at);
		t->held_at = 0;
		t->in_restore = 0;
		t->blocked = 0;
	}
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
	if (futex_waits) {
		settle(t, pid, tid);
		t->taken_at = 0;
	}
	if (valid(t->released_at))
		emit(t, pid, tid, KIND_RELEASED, 0, 0, 0, t->released_at, now);
	t->released_at = 0;
	t->in_save = 0;
	t->wait_at = now;
	t->wait_cause = t->in_ensure ? CAUSE_ENSURE : CAUSE_RESTORE;
	t->in_restore = 1;
	if (futex_waits) {
		// Held time runs from the end of the wait (or, when the take
		// did not block, from here) to the next release.
		t->held_at = now;
		t->blocked = 0;
	}
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
		emit(t, pid, tid, KIND_WAIT, t->wait_cause, 0, 0, t->wait_at, bpf_ktime_get_ns());
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
		aggregate(t, KIND_HELD, now - t->held_at);
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
		aggregate(t, KIND_SWITCH, 0);
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
		emit(t, pid, tid, KIND_WAIT, t->wait_cause, 0, 0, t->wait_at, now);
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
		emit(t, pid, tid, KIND_GC, 0, t->gc_generation, 0, t->gc_at, bpf_ktime_get_ns());
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

// The futex mechanism. A thread that asks for the GIL while another holds
// it blocks in the kernel on a futex inside the GIL's struct (the cond's
// sequence words, the mutex, or, when the switch interval forced it off,
// switch_cond): these tracepoints fire for every futex syscall of the
// host, and do work only for a thread the uprobes know waiting on a word
// of its process's GIL. Uncontended releases cost nothing here.
struct futex_enter_args {
	__u64 common;
	__s32 nr;
	__u32 _pad;
	__u64 uaddr;
	__u64 op;
	__u64 val;
	__u64 utime;
	__u64 uaddr2;
	__u64 val3;
};

struct futex_exit_args {
	__u64 common;
	__s32 nr;
	__u32 _pad;
	__s64 ret;
};

#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAKE_BITSET 10
#define FUTEX_CMD_MASK 127

// learn finds the GIL a thread waiting in PyEval_RestoreThread blocks on,
// or (r set) a thread blocking on a futex in the interpreter's static data:
// uaddr lies in the cond (glibc's futex words sit 40-47 bytes in) or is the
// mutex's lock word; the struct's start is where the interval is plausible
// and locked is 0 or 1, and with r, the whole struct lies in r and the
// thread waits on the cond of a GIL that is taken.
static __always_inline __u64 learn(__u32 pid, __u64 uaddr, struct data_range *r)
{
	// Offsets of uaddr from the GIL's start, most likely first.
	const __u16 offs[] = {72, 76, 80, 64, 68, 56, 60, 48, 52, 40, 44, 32, 36};
	for (int i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		__u64 base = uaddr - offs[i];
		if (base & 7 || (r && (base < r->lo || base + GIL_END > r->hi)))
			continue;
		__u64 head[3];
		if (bpf_probe_read_user(head, sizeof(head), (void *)base))
			continue;
		__u32 locked = (__u32)head[2];
		if (head[0] < 1 || head[0] > 1000000000 || locked > 1)
			continue;
		// last_holder is NULL or a pointer.
		if (head[1] && head[1] < 4096)
			continue;
		// A futex in the data, not known to be a GIL wait: only a waiter's
		// word of the cond (__g_signals, 72-79 bytes in), with the GIL
		// taken and a holder (an aligned pointer). A thread forced off
		// waits on switch_cond, whose words, 88 bytes further, would
		// otherwise pass for a GIL's head inside the mutex.
		if (r && ((offs[i] != 72 && offs[i] != 76) || locked != 1 || !head[1] || head[1] & 7))
			continue;
		struct gil_info g = {.base = base, .interval = head[0]};
		bpf_map_update_elem(&gils, &pid, &g, BPF_NOEXIST);
		return base;
	}
	return 0;
}

// took_since reports whether a thread woken from a GIL futex wait at
// since, with the GIL's switch_number then in woke_switch, and blocking on
// the GIL again now, took the GIL at that wake-up and ran. While the
// uprobes were detached: the GIL changed
// hands at least twice since (to this thread, then to another; a take by a
// thread that is not last_holder increments switch_number), not at most
// once (another thread took it first: the last holder taking it back does
// not count, anyone else does). Without switch_number, time decides: over
// half a switch interval (a holder is forced off only after another thread
// waited a whole interval from its take).
static __always_inline int took_since(struct thread *t, struct gil_info *g, __u64 base, __u64 now, __u64 since)
{
	__u64 grace = g ? g->interval * 1000 / 2 : 1000000;
	__u32 zero = 0;
	struct control *c = bpf_map_lookup_elem(&control_map, &zero);
	if (!c || (uprobes_active(t->pid) && since >= c->attached_since))
		// The uprobes were attached all along: the thread neither released
		// nor asked for the GIL since (that would have settled the wait),
		// so it ran at most Python code, which is forced off only after a
		// whole interval.
		return now - since >= grace;
	__u64 sw = ~0ULL;
	if (t->woke_switch != ~0ULL && !bpf_probe_read_user(&sw, sizeof(sw), (void *)(base + GIL_SWITCH_NUMBER)) && sw != ~0ULL)
		return sw - t->woke_switch >= 2;
	return now - since >= grace;
}

// seen_since reports whether the uprobes have seen t's process all along
// since since: a release (PyEval_SaveThread) would then have been seen.
static __always_inline int seen_since(struct thread *t, __u64 since)
{
	__u32 zero = 0;
	struct control *c = bpf_map_lookup_elem(&control_map, &zero);
	return c && uprobes_active(t->pid) && since >= c->attached_since;
}

// still_taking reports whether a thread whose wait was sent at a wake-up
// that found the GIL free (taken_at), and that now blocks on the GIL's
// mutex, has not taken the GIL since: it is still in take_gil (glibc
// re-locks the mutex as the cond wait returns) while another thread keeps
// the mutex (a holder preempted inside drop_gil between its signal and its
// unlock, or inside take_gil). With the uprobes attached all along, a
// release would have cleared taken_at, and half an interval tells, as in
// took_since. While they are detached: its own take would have moved
// switch_number (the GIL's last holder at that wake-up is the thread that
// let go of it), so a number unchanged since says it has not taken it.
static __always_inline int still_taking(struct thread *t, struct gil_info *g, __u64 base, __u64 now)
{
	if (seen_since(t, t->taken_at))
		return !took_since(t, g, base, now, t->taken_at);
	__u64 sw = ~0ULL;
	if (t->woke_switch == ~0ULL || bpf_probe_read_user(&sw, sizeof(sw), (void *)(base + GIL_SWITCH_NUMBER)))
		return 0;
	return sw == t->woke_switch;
}

// waking_holder ends the wait of a thread that woke from it with the GIL
// still taken and took the GIL without blocking again (the holder let go
// between the wake-up and the thread's own look at locked; likely when the
// thread is preempted as it wakes): while the uprobes are detached nothing
// else would tell until it next blocks on the GIL, perhaps never. It shows
// when the thread wakes another on the GIL's words as only a holder does:
// on switch_cond or switch_mutex (take_gil waking the thread it forced
// off), when its last wait was not there; or on the cond's signal words
// (drop_gil), once the GIL changed hands since its wake-up (a waiter that
// took a signal meant for another gives one back there, and unlocks the
// mutex as it blocks again).
static __always_inline int waking_holder(__u64 uaddr)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct thread *t = bpf_map_lookup_elem(&threads, &tid);
	if (!t || t->pid != pid || !t->blocked || !t->woke_at || t->in_gil_futex)
		return 0;
	__u64 base = t->futex_gil;
	if (!base || uaddr < base + GIL_COND || uaddr >= base + GIL_END)
		return 0;
	if (uaddr >= base + GIL_SWITCH_COND) {
		if (t->on_switch)
			return 0;
	} else if (uaddr >= base + GIL_COND + COND_SIGNALS && uaddr < base + GIL_COND + COND_SIGNALS_END) {
		__u64 sw = ~0ULL;
		if (t->woke_switch == ~0ULL || bpf_probe_read_user(&sw, sizeof(sw), (void *)(base + GIL_SWITCH_NUMBER)) ||
		    sw == t->woke_switch)
			return 0;
	} else {
		return 0;
	}
	count(COUNTER_HITS);
	settle(t, pid, tid);
	t->taken_at = 0;
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_futex")
int futex_enter(struct futex_enter_args *ctx)
{
	__u32 cmd = ctx->op & FUTEX_CMD_MASK;
	if (cmd == FUTEX_WAKE || cmd == FUTEX_WAKE_BITSET)
		return waking_holder(ctx->uaddr);
	if (cmd != FUTEX_WAIT && cmd != FUTEX_WAIT_BITSET)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct thread *t = bpf_map_lookup_elem(&threads, &tid);
	struct gil_info *g = 0;
	__u64 uaddr = ctx->uaddr;
	__u64 base = 0;
	if (!t || t->pid != pid) {
		// A thread the uprobes have not seen (a pure-Python thread that
		// never released the GIL, a Jep thread met while the uprobes are
		// detached) of a process whose GIL is known, or blocking in the
		// interpreter's static data of a probed process whose GIL is not.
		g = bpf_map_lookup_elem(&gils, &pid);
		if (!g) {
			struct data_range *r = bpf_map_lookup_elem(&data_ranges, &pid);
			if (!r || uaddr < r->lo || uaddr >= r->hi)
				return 0;
			base = learn(pid, uaddr, r);
			if (!base)
				return 0;
		}
		struct thread zero = {.pid = pid};
		if (bpf_map_update_elem(&threads, &tid, &zero, BPF_ANY))
			return 0;
		t = bpf_map_lookup_elem(&threads, &tid);
		if (!t)
			return 0;
	}
	count(COUNTER_HITS);
	if (!g)
		g = bpf_map_lookup_elem(&gils, &pid);
	if (g) {
		base = g->base;
	} else if (!base) {
		// Where the interpreter's data is known, the GIL is learned only
		// there: a thread marked in_restore may hold the GIL (it took it
		// without blocking) and block on another lock, whose futex could
		// pass for a GIL's.
		struct data_range *r = bpf_map_lookup_elem(&data_ranges, &pid);
		if (r) {
			if (uaddr >= r->lo && uaddr < r->hi)
				base = learn(pid, uaddr, r);
		} else if (t->in_restore) {
			base = learn(pid, uaddr, 0);
		}
	}
	if (!base || uaddr < base + GIL_COND || uaddr >= base + GIL_END)
		return 0;
	if (signalling(base, uaddr)) {
		// It holds the GIL: a wait it was in ended at its last wake-up.
		settle(t, pid, tid);
		t->taken_at = 0;
		return 0;
	}
	t->in_gil_futex = 1;
	t->on_switch = uaddr >= base + GIL_SWITCH_COND;
	t->on_mutex = uaddr >= base + GIL_MUTEX && uaddr < base + GIL_SWITCH_COND;
	__u64 now = bpf_ktime_get_ns();
	if (t->blocked && t->woke_at) {
		// Woken before, and blocking again: if another thread took the GIL
		// first, it is the same wait (took_since); if this one took it at
		// the wake-up and ran since, or it blocks on switch_cond (forced
		// off, it waits for another thread to take the GIL), the wait
		// ended at the wake-up.
		if (uaddr >= base + GIL_SWITCH_COND || took_since(t, g, base, now, t->woke_at))
			settle(t, pid, tid);
	}
	if (t->blocked) {
		// On the mutex, the wake-up is kept: futex_exit tells whether the
		// thread took the GIL at it.
		if (!t->on_mutex)
			t->woke_at = 0;
		return 0;
	}
	if (t->taken_at && uaddr >= base + GIL_MUTEX && uaddr < base + GIL_SWITCH_COND && still_taking(t, g, base, now)) {
		// Its wait was sent at a wake-up that found the GIL free, and it
		// blocks on the GIL's mutex before it took the GIL: the rest is
		// sent as a continuation, as below. (Taken since, it is letting
		// go of the GIL in drop_gil: no wait.)
		__u64 from = t->taken_at;
		t->taken_at = 0;
		t->blocked = t->taken_blocked;
		t->futex_gil = base;
		t->in_restore = 1;
		t->wait_at = from;
		t->wait_continues = 1;
		t->held_at = 0;
		return 0;
	}
	if (t->taken_at && !(uaddr >= base + GIL_MUTEX && uaddr < base + GIL_SWITCH_COND)) {
		// Its wait was sent at a wake-up that found the GIL free. Blocking
		// on the cond again with no release seen between, and another
		// thread took the GIL first (took_since): this one has waited on
		// since that wake-up, for the same cause; the rest is sent as a
		// continuation (EVENT_CONTINUES), which user space joins to the
		// part sent. (On the mutex it is taking the free GIL: no wait, see
		// below.)
		int again = uaddr < base + GIL_MUTEX && !took_since(t, g, base, now, t->taken_at);
		__u64 from = t->taken_at;
		t->taken_at = 0;
		if (again) {
			t->blocked = t->taken_blocked;
			t->futex_gil = base;
			t->in_restore = 1;
			t->wait_at = from;
			t->wait_continues = 1;
			t->held_at = 0;
			return 0;
		}
	}
	// A thread holding the GIL that blocks on the mutex (glibc re-locking
	// it as a cond wait returns, drop_gil taking it): no wait for the GIL.
	if (!t->in_restore && uaddr >= base + GIL_MUTEX && uaddr < base + GIL_SWITCH_COND)
		return 0;
	t->blocked = BLOCKED;
	t->futex_gil = base;
	if (!uprobes_active(pid) || (t->in_restore && !valid(t->wait_at))) {
		// The uprobes are detached, or were since the thread asked: what
		// it did before is not known, its wait is timed from here.
		t->blocked = BLOCKED_SEEN;
		t->in_restore = 1;
		t->wait_at = now;
		t->wait_cause = CAUSE_UNKNOWN;
		t->held_at = 0;
		return 0;
	}
	// Asked for the GIL in PyEval_RestoreThread and found it held: the
	// wait began there. A thread that took the GIL since and was forced
	// off asks again from the eval loop at least a switch interval after
	// its RestoreThread (another thread waited that long for it): half of
	// one tells them apart, as in took_since, with no read of the GIL on
	// the uncontended path.
	__u64 grace = g ? g->interval * 1000 / 2 : 1000000;
	if (uaddr < base + GIL_SWITCH_COND && t->in_restore && now - t->wait_at < grace) {
		t->held_at = 0;
		return 0;
	}
	// Otherwise the thread held the GIL and was made to drop it (it waits
	// on switch_cond for another thread to take it, or took it after its
	// last RestoreThread and now asks again): a forced switch.
	if (valid(t->held_at))
		aggregate(t, KIND_HELD, now - t->held_at);
	t->held_at = 0;
	aggregate(t, KIND_SWITCH, 0);
	t->in_restore = 1;
	t->wait_at = now;
	t->wait_cause = CAUSE_SWITCH;
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex")
int futex_exit(struct futex_exit_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct thread *t = bpf_map_lookup_elem(&threads, &tid);
	if (!t || t->pid != pid || !t->in_gil_futex)
		return 0;
	t->in_gil_futex = 0;
	if (!t->blocked)
		return 0;
	count(COUNTER_HITS);
	// Woken (or timed out): the thread takes the GIL now unless it blocks
	// again at once. When the GIL is free now, it takes it (it checks
	// locked again under the mutex, which it locks next), and the wait is
	// sent now, whatever the thread does next: a Jep thread may leave
	// Python through PyEval_ReleaseThread and not come back for a long
	// time, and the uprobes may be detached. If another thread gets there
	// first, this one blocks on the cond again at once and the rest of its
	// wait is sent as a continuation (futex_enter). Otherwise the wait is
	// ended at the last wake-up by the thread's next release, its next
	// RestoreThread or its next GIL futex wait well after (settle), so a
	// wake-up that lost the GIL to another thread stays one wait.
	__u64 now = bpf_ktime_get_ns();
	// locked (an int) and switch_number, 8 bytes apart.
	struct {
		__u32 locked;
		__u32 _pad;
		__u64 switch_number;
	} head;
	if (bpf_probe_read_user(&head, sizeof(head), (void *)(t->futex_gil + GIL_LOCKED))) {
		t->woke_at = now;
		t->woke_switch = ~0ULL;
		return 0;
	}
	if (t->on_mutex && t->woke_at && head.locked && t->woke_switch != ~0ULL && head.switch_number != t->woke_switch)
		// Off the mutex with the GIL taken, after a wake-up that found
		// it taken, and the GIL changed hands since: this thread took it
		// then, without blocking again, and blocked on the mutex letting
		// go of it (drop_gil locks it before it clears locked). Its wait
		// ended at that wake-up, which is kept, with its switch_number,
		// for settle (waking_holder, took_since). Were it another
		// thread's take, this one waits on the cond again: the same wait.
		return 0;
	t->woke_at = now;
	t->woke_switch = head.switch_number;
	// A wait shorter than min_duration would be summed in the kernel, and
	// a continuation could not be joined to it: it is settled the old way.
	if (head.locked || !t->wait_at || now - t->wait_at < min_duration_ns)
		return 0;
	__u8 blocked = t->blocked;
	settle(t, pid, tid);
	t->taken_at = now;
	t->taken_blocked = blocked;
	return 0;
}
