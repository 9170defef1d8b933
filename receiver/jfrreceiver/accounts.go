package jfrreceiver

import (
	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-ai/otelcol-ai/internal/runtimestate"

	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	otelmetric "go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/leak"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmaccounts"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmmetrics"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/metadata"
)

// AccountsConfig configures the accounts read beside JFR (JNI references,
// unaccounted native memory) and the leak detection over every account.
type AccountsConfig struct {
	// JNIReferences configures the thread dumps JNI counts are read from.
	JNIReferences JNIReferencesConfig `mapstructure:"jni_references"`
	// LeakDetection configures jvm.memory.leak_suspected.
	LeakDetection AccountLeakConfig `mapstructure:"leak_detection"`
	// RuntimeState, when set, is the runtimestate extension every
	// account reading is shared through (the nvml receiver joins a
	// process's GPU memory with them); nil shares nothing.
	RuntimeState *component.ID `mapstructure:"runtime_state"`
}

// JNIReferencesConfig configures reading JNI reference counts.
type JNIReferencesConfig struct {
	// Enabled turns the reads on where repositories::attach::enabled is
	// on (they attach as the recording does, under the same opt-outs).
	Enabled bool `mapstructure:"enabled"`
	// Interval is the least time between two thread dumps of one JVM.
	Interval time.Duration `mapstructure:"interval"`
	// MaxThreads skips JVMs with more threads (a thread dump's pause
	// grows with them).
	MaxThreads int64 `mapstructure:"max_threads"`
	// Timeout bounds one thread dump's attach exchange.
	Timeout time.Duration `mapstructure:"timeout"`
}

// AccountLeakConfig holds the leak thresholds per account (internal/leak
// for the rule).
type AccountLeakConfig struct {
	// Enabled turns leak detection on.
	Enabled bool `mapstructure:"enabled"`
	// Window is the sliding window assessed.
	Window time.Duration `mapstructure:"window"`
	// MinSamples is the fewest readings in a window before it is assessed.
	MinSamples int `mapstructure:"min_samples"`
	// Bytes are the thresholds of the accounts in bytes (heap,
	// direct_buffers, native_unaccounted, metaspace).
	Bytes LeakThresholds `mapstructure:"bytes"`
	// References are those of jni_global_refs.
	References LeakThresholds `mapstructure:"references"`
	// Fast is a second tier for the byte accounts a fast leak is
	// unambiguous in (native_unaccounted, direct_buffers): a short window
	// with high thresholds, so that such a leak is named within about a
	// minute and a half rather than after half the window above.
	Fast FastLeakConfig `mapstructure:"fast"`
}

// FastLeakConfig configures the fast tier of the leak detection. One leak
// gives one alarm whichever tier names it (leak.Alarms).
type FastLeakConfig struct {
	// Enabled turns the fast tier on (with leak_detection::enabled).
	Enabled bool `mapstructure:"enabled"`
	// Window is the fast tier's sliding window; shorter than the slow
	// tier's.
	Window time.Duration `mapstructure:"window"`
	// MinSamples is the fewest readings in its window before it assesses.
	MinSamples int `mapstructure:"min_samples"`
	// Bytes are its thresholds, in bytes.
	Bytes LeakThresholds `mapstructure:"bytes"`
}

// thresholds: the fast tier asks the floor to rise in all three quarter
// steps, each by more than an eighth of min_growth, so that a rise counts
// once it has gone on for three quarters of the span assessed (30 s at the
// first assessment, 45 s once the window is full): a JVM's start-up that
// rises for a reading or two and levels off does not, whatever it drifts
// after. A leak at min_growth_rate rises about four times that a quarter.
func (f FastLeakConfig) thresholds() leak.Config {
	return leak.Config{Window: f.Window, MinSamples: f.MinSamples, MinGrowthRate: f.Bytes.MinGrowthRate, MinGrowth: f.Bytes.MinGrowth,
		MinRises: 3, MinStep: f.Bytes.MinGrowth / 8}
}

// fastSources are the accounts the fast tier assesses. Heap and metaspace
// grow fast while a JVM starts and warms up (caches, class loading) and a
// heap leak ends in OutOfMemoryError at -Xmx; JNI references are read once
// a minute. README (Accounts and leaks) has the measurements.
var fastSources = []metadata.AttributeJvmMemoryLeakSource{
	metadata.AttributeJvmMemoryLeakSourceNativeUnaccounted,
	metadata.AttributeJvmMemoryLeakSourceDirectBuffers,
}

// LeakThresholds are one unit's thresholds.
type LeakThresholds struct {
	// MinGrowthRate is the least-squares growth per second at or above
	// which an account counts as growing.
	MinGrowthRate float64 `mapstructure:"min_growth_rate"`
	// MinGrowth is the rise of the account's floor over the window.
	MinGrowth int64 `mapstructure:"min_growth"`
}

func (c AccountLeakConfig) thresholds(t LeakThresholds) leak.Config {
	return leak.Config{Window: c.Window, MinSamples: c.MinSamples, MinGrowthRate: t.MinGrowthRate, MinGrowth: t.MinGrowth}
}

// validate reports every wrong key of accounts::.
func (c AccountsConfig) validate() []error {
	var errs []error
	if j := c.JNIReferences; j.Enabled {
		if j.Interval <= 0 {
			errs = append(errs, fmt.Errorf("accounts::jni_references::interval must be positive, got %s", j.Interval))
		}
		if j.Timeout <= 0 {
			errs = append(errs, fmt.Errorf("accounts::jni_references::timeout must be positive, got %s", j.Timeout))
		}
		if j.MaxThreads < 0 {
			errs = append(errs, fmt.Errorf("accounts::jni_references::max_threads must not be negative (0: no bound), got %d", j.MaxThreads))
		}
	}
	if l := c.LeakDetection; l.Enabled {
		if err := l.thresholds(l.Bytes).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("accounts::leak_detection (bytes): %w", err))
		}
		if err := l.thresholds(l.References).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("accounts::leak_detection (references): %w", err))
		}
		if f := l.Fast; f.Enabled {
			if err := f.thresholds().Validate(); err != nil {
				errs = append(errs, fmt.Errorf("accounts::leak_detection::fast: %w", err))
			}
		}
	}
	return errs
}

// staleAfter is the age past which a periodic JFR reading (NMT, direct
// buffers; every 5 s) is not used for the unaccounted native memory: a
// JVM whose recording stalled would otherwise show its direct buffers'
// growth as native.
const staleAfter = 30 * time.Second

func fresh(rd jvmmetrics.Reading, now time.Time) bool {
	return rd.T > 0 && now.Sub(time.Unix(0, rd.T)) <= staleAfter
}

// accountKey names one leak-detection series: a JVM's account.
type accountKey struct {
	jvm    jvmevent.JVM
	source metadata.AttributeJvmMemoryLeakSource
}

// accounts is the receiver's state for the JVMs' accounts, owned by the
// loop goroutine. A restart of the receiver builds a new aggregator, and
// with it new accounts (agg tells).
type accounts struct {
	agg *jvmmetrics.Aggregator
	// reads asks the JVMs where their heap lies and for thread dumps
	// (JNI counts); nil when attach is off.
	reads *jvmaccounts.Reader
	bytes *leak.Detector[accountKey]
	refs  *leak.Detector[accountKey]
	fast  *leak.Detector[accountKey] // nil when off
	// alarms merges the tiers' verdicts: one record per leak.
	alarms *leak.Alarms[accountKey]
	lb     *metadata.LogsBuilder
	procs  *procresource.Reader
	// runtime is the receiver's runtimestate store (nil: none), logger
	// its logger.
	runtime *runtimestate.Store
	logger  *zap.Logger
	// heapErrs holds the JVMs whose smaps could not be read, with why
	// (logged when it changes).
	heapErrs map[jvmaccounts.Target]string
}

// The tiers, as leak.Alarms numbers them.
const (
	tierSlow = iota
	tierFast
	tiers
)

var tierNames = [tiers]metadata.AttributeJvmMemoryLeakTier{metadata.AttributeJvmMemoryLeakTierSlow, metadata.AttributeJvmMemoryLeakTierFast}

func (r *jfrReceiver) newAccounts() *accounts {
	cfg := r.cfg.Accounts
	a := &accounts{agg: r.agg, procs: procresource.NewReader(r.cfg.ProcRoot, 0), runtime: r.runtime, logger: r.set.Logger,
		heapErrs: map[jvmaccounts.Target]string{}}
	if l := cfg.LeakDetection; l.Enabled {
		a.bytes = leak.New[accountKey](l.thresholds(l.Bytes))
		a.refs = leak.New[accountKey](l.thresholds(l.References))
		if f := l.Fast; f.Enabled {
			a.fast = leak.New[accountKey](f.thresholds())
			// Neither is an error: a test or a node may shorten the slow
			// window, or lengthen collection_interval, for reasons of
			// its own; the fast tier then adds little or nothing.
			if readings := int(f.Window/r.cfg.CollectionInterval) + 1; readings < f.MinSamples {
				r.set.Logger.Warn("the fast leak tier never assesses: its window holds fewer readings than min_samples at collection_interval",
					zap.Duration("window", f.Window), zap.Int("readings", readings), zap.Int("min_samples", f.MinSamples),
					zap.Duration("collection_interval", r.cfg.CollectionInterval))
			}
			if f.Window >= l.Window {
				r.set.Logger.Warn("the fast leak tier's window is not shorter than accounts::leak_detection::window: it names no leak sooner",
					zap.Duration("fast_window", f.Window), zap.Duration("window", l.Window))
			}
		}
		// A reminder once per slow window while a leak lasts, and a new
		// alarm only after a slow window without any suspicion: a leak
		// that pauses, or whose rate wavers about the fast tier's
		// threshold, stays one alarm.
		a.alarms = leak.NewAlarms[accountKey](tiers, l.Window, l.Window)
		a.lb = metadata.NewLogsBuilder(metadata.LogsBuilderConfig{Events: r.cfg.Events, ResourceAttributes: r.cfg.ResourceAttributes}, r.set)
	}
	if r.cfg.Repositories.Enabled && r.cfg.Repositories.Attach.Enabled {
		j := cfg.JNIReferences
		timeout := r.cfg.Repositories.Attach.Timeout
		if j.Enabled {
			timeout = j.Timeout
		}
		pods := r.podPolicy()
		optOuts := procresource.NewReader(r.cfg.ProcRoot, 0)
		a.reads = jvmaccounts.NewReader(jvmaccounts.ReaderConfig{
			ProcRoot: r.cfg.ProcRoot, ThreadDumps: j.Enabled, Interval: j.Interval, MaxThreads: j.MaxThreads, Timeout: timeout,
			OptOut: func(t jvmaccounts.Target) string { return jniOptOut(optOuts, pods, t) },
			Done: func(t jvmaccounts.Target, outcome string, err error, changed bool) {
				r.telemetry.ReceiverJfrJniReads.Add(context.Background(), 1, otelmetric.WithAttributeSet(attribute.NewSet(attribute.String("result", outcome))))
				if err != nil && changed {
					r.set.Logger.Info("JNI reference count not read", zap.Int("pid", t.PID), zap.String("result", outcome), zap.Error(err))
				}
			},
			HeapDone: func(t jvmaccounts.Target, err error) {
				if err != nil {
					r.set.Logger.Info("JVM heap place not read: its unaccounted native memory sets the committed heap against the resident memory",
						zap.Int("pid", t.PID), zap.Error(err))
				}
			},
		})
	}
	return a
}

// heapResident returns the resident part of a JVM's heap, for its
// unaccounted native memory: -1 when the heap's place is not known (the
// JVM may not be attached to, or did not say; the committed heap stands
// for it), false while it is not to be computed this collection (the
// place is being asked for, or smaps could not be read): one JVM's series
// is computed one way throughout.
func (a *accounts) heapResident(procRoot string, t jvmaccounts.Target) (int64, bool) {
	if a.reads == nil {
		return -1, true
	}
	place, state := a.reads.Heap(t)
	switch state {
	case jvmaccounts.HeapPending:
		return 0, false
	case jvmaccounts.HeapUnknown:
		return -1, true
	}
	rss, err := jvmaccounts.HeapResident(procRoot, t.PID, place)
	if err != nil {
		if a.heapErrs[t] != err.Error() {
			a.logger.Info("JVM heap residency not read", zap.Int("pid", t.PID), zap.Error(err))
		}
		a.heapErrs[t] = err.Error()
		return 0, false
	}
	delete(a.heapErrs, t)
	return rss, true
}

// jniOptOut says why a JVM must not be attached to for a thread dump: the
// opt-outs of the recording (package attach), and the test hook.
func jniOptOut(procs *procresource.Reader, pods attach.PodPolicy, t jvmaccounts.Target) string {
	if attachOnly != nil && !attachOnly(t.PID) {
		return "not this test's JVM"
	}
	if why := attach.ProcessOptOut(procs, t.PID); why != "" {
		return why
	}
	if attach.AttachDisabled(procs, t.PID) {
		return "-XX:+DisableAttachMechanism"
	}
	if pods != nil {
		res, err := procs.Resolve(t.PID)
		if err != nil {
			return "its pod cannot be read: " + err.Error()
		}
		if uid := res.Container.PodUID; uid != "" {
			why, known := pods.OptOut(uid)
			switch {
			case !known:
				return "its pod's opt-out is not known yet: " + why
			case why != "":
				return why
			}
		}
	}
	return ""
}

// closeAccounts waits for the thread dumps under way (each bounded by
// accounts::jni_references::timeout) and starts no more: the loop calls it
// when it stops, before its last collection, which then takes what they
// read. A restart's new aggregator makes new accounts.
func (r *jfrReceiver) closeAccounts() {
	if r.acc != nil && r.acc.reads != nil {
		ctx, cancel := context.WithTimeout(context.Background(), max(r.cfg.Accounts.JNIReferences.Timeout, r.cfg.Repositories.Attach.Timeout)+time.Second)
		defer cancel()
		r.acc.reads.Close(ctx)
	}
}

// collectAccounts reads every live JVM's accounts that JFR leaves out
// (unaccounted native memory each collection, JNI references when a read
// is due), hands them to the aggregator for the metrics, runs the leak
// detection over every account and sends the leak records.
func (r *jfrReceiver) collectAccounts(ctx context.Context, now time.Time) {
	if r.acc == nil || r.acc.agg != r.agg {
		r.acc = r.newAccounts()
	}
	a := r.acc
	ts := pcommon.NewTimestampFromTime(now)
	reported := 0
	assessed := map[jvmaccounts.Target]bool{}
	for jvm, info := range r.jvms {
		if jvm.PID <= 0 || jvm.StartTicks == 0 {
			continue // not a live process of the proc root
		}
		acct, ok := r.agg.Accounts(jvm)
		if !ok {
			continue
		}
		st, err := jvmaccounts.ReadStatus(r.cfg.ProcRoot, jvm.PID)
		if err != nil {
			continue // exited; its batches end it
		}
		if start, err := a.procs.StartTicks(jvm.PID); err != nil || start != jvm.StartTicks {
			continue // the pid names another process now
		}
		found := 0
		observe := func(src metadata.AttributeJvmMemoryLeakSource, at time.Time, v int64) {
			if a.observe(ctx, ts, jvm, src, at, v) {
				found++
			}
		}
		// JFR samples NMT and direct buffers every few seconds (5 s in the
		// receiver's settings and JFR's own): an older one is not set
		// against the resident memory of now.
		if !fresh(acct.NMTCommitted, now) {
			acct.Accounted.NMTCommitted = -1
		}
		if !fresh(acct.DirectBuffers, now) {
			acct.Accounted.DirectBuffers = -1
		}
		vpid := jvm.PID
		if v, ok := info.resource.Attributes().Get(window.ResourceVPID); ok && v.Int() > 0 {
			vpid = int(v.Int())
		}
		target := jvmaccounts.Target{PID: jvm.PID, NSPID: vpid, StartTicks: jvm.StartTicks}
		assessed[target] = true
		if a.reads != nil {
			if rd, ok := a.reads.Poll(target, st.Threads, now); ok {
				r.agg.SetJNIRefs(jvm, rd.At, rd.Refs)
				observe(metadata.AttributeJvmMemoryLeakSourceJniGlobalRefs, rd.At, rd.Refs.Global)
			}
		}
		if heap, ok := a.heapResident(r.cfg.ProcRoot, target); ok {
			if u, ok := jvmaccounts.Unaccounted(st.RSSAnon, acct.Accounted, heap); ok {
				r.agg.SetUnaccounted(jvm, now, u)
				observe(metadata.AttributeJvmMemoryLeakSourceNativeUnaccounted, now, u)
			}
		}
		// JFR's readings, at the time each was measured: a series sees
		// each once (an older or equal time is not a new reading).
		for _, s := range []struct {
			src metadata.AttributeJvmMemoryLeakSource
			rd  jvmmetrics.Reading
		}{
			{metadata.AttributeJvmMemoryLeakSourceHeap, acct.HeapAfterGC},
			{metadata.AttributeJvmMemoryLeakSourceDirectBuffers, acct.DirectBuffers},
			{metadata.AttributeJvmMemoryLeakSourceMetaspace, acct.Metaspace},
		} {
			if s.rd.T > 0 {
				observe(s.src, time.Unix(0, s.rd.T), s.rd.Value)
			}
		}
		if found > 0 {
			reported += found
			a.lb.EmitForResource(metadata.WithLogsResource(info.resource))
		}
	}
	if a.reads != nil {
		a.reads.Sweep()
	}
	for t := range a.heapErrs {
		if !assessed[t] {
			delete(a.heapErrs, t)
		}
	}
	if a.alarms != nil {
		a.bytes.Sweep()
		a.refs.Sweep()
		if a.fast != nil {
			a.fast.Sweep()
		}
		a.alarms.Sweep()
	}
	if reported == 0 {
		return
	}
	logs := a.lb.Emit()
	r.logs.Send(func(next consumer.Logs) {
		if err := next.ConsumeLogs(ctx, logs); err != nil && !errors.Is(err, context.Canceled) {
			r.set.Logger.Warn("sending JVM memory leak records", zap.Int("records", reported), zap.Error(err))
		}
	})
}

// runtimeProcess is the process a JVM's batches are about, as the runtime
// state names it.
func runtimeProcess(jvm jvmevent.JVM) runtimestate.Process {
	return runtimestate.Process{PID: jvm.PID, StartTicks: jvm.StartTicks}
}

// observe shares a reading of one of a JVM's accounts through the runtime
// state, runs it through each tier that assesses it (the slow one first,
// so that it reports what both see at once), sets the merged verdict on
// the metric and the runtime state, and adds a leak record to the builder
// when the alarm says so; true when it did.
func (a *accounts) observe(ctx context.Context, ts pcommon.Timestamp, jvm jvmevent.JVM, src metadata.AttributeJvmMemoryLeakSource, at time.Time, v int64) bool {
	if a.runtime != nil {
		a.runtime.Record(runtimeProcess(jvm), src.String(), at, v)
	}
	if a.alarms == nil {
		return false
	}
	key := accountKey{jvm, src}
	var dets [tiers]*leak.Detector[accountKey]
	dets[tierSlow] = a.bytes
	if src == metadata.AttributeJvmMemoryLeakSourceJniGlobalRefs {
		dets[tierSlow] = a.refs
	}
	if a.fast != nil && slices.Contains(fastSources, src) {
		dets[tierFast] = a.fast
	}
	var verdict leak.Verdict
	var report leak.Assessment
	tier := -1
	for t, det := range dets {
		if det == nil {
			continue
		}
		as := det.Observe(key, at, v)
		verdict = a.alarms.Assessed(key, t, at, as)
		if verdict.Report {
			report, tier = as, t
		}
	}
	if verdict.Ready {
		a.agg.SetLeakSuspected(jvm, src, at, verdict.Suspected)
		if a.runtime != nil {
			a.runtime.Assess(runtimeProcess(jvm), src.String(), verdict.Suspected)
		}
	}
	if tier < 0 {
		return false
	}
	a.lb.RecordJvmMemoryLeakSuspectedEvent(ctx, ts, src, tierNames[tier], report.GrowthRate, report.FloorGrowth, report.Span.Seconds(), v)
	a.logger.Warn("JVM memory leak suspected",
		zap.Int("pid", jvm.PID), zap.String("source", src.String()), zap.String("tier", tierNames[tier].String()),
		zap.Float64("growth_per_second", report.GrowthRate), zap.Int64("floor_growth", report.FloorGrowth),
		zap.Duration("window", report.Span), zap.Int64("value", v))
	return true
}
