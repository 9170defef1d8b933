// Package window is the runtime-window model that otelcol-ai's receivers emit
// and its correlator reads: a time interval in which something happened to a
// thread or a whole process (a JVM safepoint, a GC pause, a Python thread
// running without the GIL or waiting for it).
//
// A window travels as one OTel log record: EventName is the Kind, Timestamp
// the start in Unix epoch ns, the attribute AttrDuration the length in ns, and
// kind-specific attributes beside it. The record's resource names the process
// (its identity, below, and ResourceRuntimeName, ResourceRuntimeVersion).
// Encode and Decode are the only code that knows this layout; everything else
// imports them.
//
// # Process identity
//
// A window's resource, and that of every metric about a process from the
// jfr, pythongil and nvml receivers, names the process from both sides
// (written by procresource.PutIdentity, the one place that does):
//
//   - process.pid (ResourcePID): the pid the node sees (the collector's
//     proc root, the host's pid namespace with hostPID);
//   - process.vpid (ResourceVPID): the pid the process sees itself as, the
//     last field of NSpid in /proc/<pid>/status; equal to process.pid on a
//     bare host, usually 1 for a container's main process; set whenever
//     the status file could be read;
//   - container.id (ResourceContainerID) and k8s.pod.uid
//     (ResourceK8sPodUID): from /proc/<pid>/cgroup as the node's cgroup
//     namespace shows it, when the process is in a container or pod;
//   - host.name (ResourceHostName): the node's name, K8S_NODE_NAME (the
//     chart sets it from the downward API spec.nodeName) when set, else
//     os.Hostname() on a bare host — never the agent pod's own hostname;
//   - k8s.node.name (ResourceNodeName): K8S_NODE_NAME, only when set.
//
// An SDK inside a container sees the other side: its process.pid is the
// container's view (the node agent's process.vpid), its host.name the pod's
// hostname (the pod name, not the node), its container.id where a detector
// finds one — possibly the pod's sandbox ("pause") container's id, or
// none, under cgroup v2 — and k8s.pod.uid only when k8sattributes adds it.
// So a span and a window name the same process when (container.id,
// process.pid of the span) equals (container.id, process.vpid of the
// window); or (k8s.pod.uid, that pid) names one process of the pod; or, on
// a bare host, the node and host pid agree. Two containers whose processes
// are both pid 1 are two processes. procresource.Index answers these
// lookups from the node's side.
package window // import "github.com/otelcol-ai/otelcol-ai/internal/window"

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// Kind names what a window is. It is the log record's EventName.
type Kind string

// The window kinds. Each is listed with its source in the project's docs.
const (
	// KindJVMSafepoint: all Java threads stopped, from SafepointBegin to
	// SafepointEnd (JFR) or one -Xlog:safepoint line.
	KindJVMSafepoint Kind = "jvm.safepoint"
	// KindJVMGCPause: one GC pause phase (JFR jdk.GCPhasePause or an
	// -Xlog:gc pause line).
	KindJVMGCPause Kind = "jvm.gc.pause"
	// KindPythonGILReleased: a Python thread ran native code without the
	// GIL (PyEval_SaveThread → PyEval_RestoreThread).
	KindPythonGILReleased Kind = "python.gil.released"
	// KindPythonGILWait: a Python thread waited to (re)acquire the GIL.
	KindPythonGILWait Kind = "python.gil.wait"
	// KindPythonGCPause: CPython's cyclic garbage collector ran, holding
	// the GIL throughout.
	KindPythonGCPause Kind = "python.gc.pause"
)

var knownKinds = []Kind{KindJVMSafepoint, KindJVMGCPause, KindPythonGILReleased, KindPythonGILWait, KindPythonGCPause}

// Kinds returns every kind this package knows, in a fixed order.
func Kinds() []Kind { return slices.Clone(knownKinds) }

// Known reports whether k is one of the kinds this package defines.
func (k Kind) Known() bool { return slices.Contains(knownKinds, k) }

// Log record attribute names.
const (
	// AttrDuration is the window's length in ns (int); end = start + duration.
	AttrDuration = "runtime.window.duration"
	// AttrThreadID is the thread the window happened to: the native tid for
	// CPython, the Java thread id for the JVM (int).
	AttrThreadID = "thread.id"
	// AttrThreadName is the thread's name where known (string).
	AttrThreadName = "thread.name"
	// AttrSamplingRatio is the fraction of time the source was observed
	// (double, 0–1) when a receiver duty-cycles its probes to stay within
	// an overhead budget; absent means 1.
	AttrSamplingRatio = "runtime.window.sampling_ratio"

	// AttrJVMGCName is the collector that paused (string, e.g. "G1 Young").
	AttrJVMGCName = "jvm.gc.name"
	// AttrJVMGCCause is why the GC ran (string, e.g. "G1 Evacuation Pause").
	AttrJVMGCCause = "jvm.gc.cause"
	// AttrJVMGCID is the JVM's GC number (int).
	AttrJVMGCID = "jvm.gc.id"
	// AttrJVMSafepointID is the JVM's safepoint number (int).
	AttrJVMSafepointID = "jvm.safepoint.id"
	// AttrJVMVMOperation is the VM operation that needed the safepoint
	// (string, e.g. "G1CollectForAllocation").
	AttrJVMVMOperation = "jvm.vm_operation"

	// AttrPythonGILWaitCause says how the thread came to wait (string, one
	// of the GILWaitCause* values).
	AttrPythonGILWaitCause = "python.gil.wait.cause"
	// AttrPythonGCGeneration is the generation CPython's collector
	// collected (int, 0–2).
	AttrPythonGCGeneration = "python.gc.generation"
)

// Values of AttrPythonGILWaitCause.
const (
	// GILWaitCauseRestore: the thread returned from native code
	// (PyEval_RestoreThread) and found the GIL taken.
	GILWaitCauseRestore = "restore_thread"
	// GILWaitCauseEnsure: a thread entered Python from outside
	// (PyGILState_Ensure, as embedding hosts such as Jep do).
	GILWaitCauseEnsure = "gilstate_ensure"
	// GILWaitCauseSwitch: the thread was made to drop the GIL by the switch
	// interval and waited to take it back.
	GILWaitCauseSwitch = "switch_interval"
)

// Resource attribute names of a window's process: its identity as the node
// sees it and as it sees itself (see the package doc), and its runtime.
const (
	// ResourceHostName is the node's name (string): K8S_NODE_NAME in
	// Kubernetes, the host's name on a bare host; never the agent pod's.
	ResourceHostName = "host.name"
	// ResourceNodeName is the Kubernetes node's name (string), present only
	// in Kubernetes.
	ResourceNodeName = "k8s.node.name"
	// ResourcePID is the process id in the node's (the proc root's) pid
	// namespace (int).
	ResourcePID = "process.pid"
	// ResourceVPID is the process id in the process's own, innermost pid
	// namespace (int): what getpid() returns inside its container, equal
	// to ResourcePID for a process on the host.
	ResourceVPID = "process.vpid"
	// ResourceContainerID is the 64-hex-digit container id from the
	// process's cgroup (string), absent outside a container.
	ResourceContainerID = "container.id"
	// ResourceK8sPodUID is the pod's UID, 8-4-4-4-12 with dashes (string),
	// absent outside a pod.
	ResourceK8sPodUID = "k8s.pod.uid"

	ResourceRuntimeName    = "process.runtime.name"
	ResourceRuntimeVersion = "process.runtime.version"
)

// Values of ResourceRuntimeName.
const (
	RuntimeJava    = "java"
	RuntimeCPython = "cpython"
)

// Window is one runtime window.
type Window struct {
	// Kind says what happened.
	Kind Kind
	// Start is the window's start in Unix epoch ns.
	Start int64
	// Duration is the window's length; never negative.
	Duration time.Duration
	// ThreadID is the thread's id (see AttrThreadID); 0 means the window
	// concerns the whole process or the thread is not known.
	ThreadID int64
	// ThreadName is the thread's name, "" when not known.
	ThreadName string
	// Attributes are the kind-specific attributes (AttrJVMGCName, …), as
	// pcommon.Map.FromRaw takes them: string, bool, int64, float64, []byte,
	// []any and map[string]any. Integers of other widths are accepted on
	// Encode and come back from Decode as int64.
	Attributes map[string]any
}

// End returns the window's end in Unix epoch ns.
func (w Window) End() int64 { return w.Start + int64(w.Duration) }

// ErrNotWindow is wrapped by Decode's errors for a log record that is not a
// runtime window at all (no EventName, or no duration attribute): readers
// of mixed logs skip such records.
var ErrNotWindow = errors.New("not a runtime window")

// ErrUnknownKind is wrapped by Decode's errors for a record that has the
// shape of a window but a kind this package does not define (a newer
// producer): readers skip it.
var ErrUnknownKind = errors.New("unknown window kind")

// ErrMalformed is wrapped by errors for a window whose fields are wrong:
// a duration of the wrong type or negative, a start of zero, a thread id
// that is not an int, an attribute value of an unsupported type.
var ErrMalformed = errors.New("malformed runtime window")

// Error says why a record could not be encoded or decoded as a window. Err
// is ErrNotWindow, ErrUnknownKind or ErrMalformed.
type Error struct {
	// EventName is the record's event name (or the window's kind).
	EventName string
	// Attribute is the attribute at fault, "" when the fault is elsewhere.
	Attribute string
	// Reason says what is wrong.
	Reason string
	// Err is the category, for errors.Is.
	Err error
}

func (e *Error) Error() string {
	name := e.EventName
	if name == "" {
		name = "(no event name)"
	}
	if e.Attribute != "" {
		return fmt.Sprintf("window %s: attribute %s: %s: %v", name, e.Attribute, e.Reason, e.Err)
	}
	return fmt.Sprintf("window %s: %s: %v", name, e.Reason, e.Err)
}

// Unwrap returns the category.
func (e *Error) Unwrap() error { return e.Err }

// reserved are the attributes Encode writes from Window's own fields.
var reserved = map[string]struct{}{AttrDuration: {}, AttrThreadID: {}, AttrThreadName: {}}

// Encode writes w into lr: EventName, Timestamp, the duration and thread
// attributes, and w.Attributes. ObservedTimestamp is left to the caller,
// who knows when it saw the window. Attributes already in lr are kept
// unless w overwrites them. It fails, leaving lr partly written, when w
// cannot be a window (unknown kind, no start, negative duration, an
// attribute that shadows a field or has an unsupported type).
func Encode(w Window, lr plog.LogRecord) error {
	name := string(w.Kind)
	if !w.Kind.Known() {
		return &Error{EventName: name, Reason: "kind is not one of window.Kinds()", Err: ErrUnknownKind}
	}
	if w.Start <= 0 {
		return &Error{EventName: name, Reason: fmt.Sprintf("start %d is not a Unix time in ns", w.Start), Err: ErrMalformed}
	}
	if w.Duration < 0 {
		return &Error{EventName: name, Attribute: AttrDuration, Reason: fmt.Sprintf("negative duration %d", w.Duration), Err: ErrMalformed}
	}
	lr.SetEventName(name)
	lr.SetTimestamp(pcommon.Timestamp(w.Start))
	attrs := lr.Attributes()
	attrs.PutInt(AttrDuration, int64(w.Duration))
	if w.ThreadID != 0 {
		attrs.PutInt(AttrThreadID, w.ThreadID)
	}
	if w.ThreadName != "" {
		attrs.PutStr(AttrThreadName, w.ThreadName)
	}
	// Sorted so that a failure is reported for the same key every time.
	for _, k := range slices.Sorted(maps.Keys(w.Attributes)) {
		if _, ok := reserved[k]; ok {
			return &Error{EventName: name, Attribute: k, Reason: "set by a Window field, not by Attributes", Err: ErrMalformed}
		}
		if err := putRaw(attrs, k, w.Attributes[k]); err != nil {
			return &Error{EventName: name, Attribute: k, Reason: err.Error(), Err: ErrMalformed}
		}
	}
	return nil
}

// putRaw stores v under k, widening Go integer types to int64 first because
// pcommon only stores int64.
func putRaw(attrs pcommon.Map, k string, v any) error {
	switch x := v.(type) {
	case int:
		attrs.PutInt(k, int64(x))
	case int32:
		attrs.PutInt(k, int64(x))
	case uint32:
		attrs.PutInt(k, int64(x))
	case uint64:
		if x > 1<<63-1 {
			return fmt.Errorf("uint64 %d overflows int64", x)
		}
		attrs.PutInt(k, int64(x))
	default:
		val := attrs.PutEmpty(k)
		if err := val.FromRaw(v); err != nil {
			attrs.Remove(k)
			return fmt.Errorf("value of type %T: %w", v, err)
		}
	}
	return nil
}

// Decode reads a window back from lr. Errors are *Error; errors.Is with
// ErrNotWindow, ErrUnknownKind or ErrMalformed tells them apart.
func Decode(lr plog.LogRecord) (Window, error) {
	name := lr.EventName()
	if name == "" {
		return Window{}, &Error{Reason: "record has no event name", Err: ErrNotWindow}
	}
	attrs := lr.Attributes()
	dv, ok := attrs.Get(AttrDuration)
	if !ok {
		return Window{}, &Error{EventName: name, Attribute: AttrDuration, Reason: "missing", Err: ErrNotWindow}
	}
	kind := Kind(name)
	if !kind.Known() {
		return Window{}, &Error{EventName: name, Reason: "kind is not one of window.Kinds()", Err: ErrUnknownKind}
	}
	if dv.Type() != pcommon.ValueTypeInt {
		return Window{}, &Error{EventName: name, Attribute: AttrDuration, Reason: "type " + dv.Type().String() + ", want Int", Err: ErrMalformed}
	}
	if dv.Int() < 0 {
		return Window{}, &Error{EventName: name, Attribute: AttrDuration, Reason: fmt.Sprintf("negative duration %d", dv.Int()), Err: ErrMalformed}
	}
	start := int64(lr.Timestamp())
	if start <= 0 {
		return Window{}, &Error{EventName: name, Reason: "no start timestamp", Err: ErrMalformed}
	}
	w := Window{Kind: kind, Start: start, Duration: time.Duration(dv.Int())}
	var err error
	attrs.Range(func(k string, v pcommon.Value) bool {
		switch k {
		case AttrDuration:
		case AttrThreadID:
			if v.Type() != pcommon.ValueTypeInt {
				err = &Error{EventName: name, Attribute: k, Reason: "type " + v.Type().String() + ", want Int", Err: ErrMalformed}
				return false
			}
			w.ThreadID = v.Int()
		case AttrThreadName:
			if v.Type() != pcommon.ValueTypeStr {
				err = &Error{EventName: name, Attribute: k, Reason: "type " + v.Type().String() + ", want Str", Err: ErrMalformed}
				return false
			}
			w.ThreadName = v.Str()
		default:
			if w.Attributes == nil {
				w.Attributes = make(map[string]any, attrs.Len())
			}
			w.Attributes[k] = v.AsRaw()
		}
		return true
	})
	if err != nil {
		return Window{}, err
	}
	return w, nil
}
