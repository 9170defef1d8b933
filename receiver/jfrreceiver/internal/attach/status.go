package attach

// State is where a discovered JVM stands with the receiver: one of the
// State* values, the `state` attribute of otelcol_receiver_jfr_jvms.
type State string

// The states of a discovered JVM, the same vocabulary as the pythongil
// receiver's for Python processes where they mean the same.
const (
	// StateFound: discovered; nothing read yet (attach off, the JVM not far
	// enough in its start, or the owner's choice still being looked up).
	StateFound State = "found"
	// StateRecordingOurs: read from the recording the receiver started.
	StateRecordingOurs State = "recording_ours"
	// StateRecordingTheirs: the JVM records JFR itself; its recording is
	// read (when it has a disk repository), never doubled.
	StateRecordingTheirs State = "recording_theirs"
	// StateOptedOut: its owner turned attaching off (property, environment,
	// pod annotation or namespace label); nothing is started in it.
	StateOptedOut State = "opted_out"
	// StateOptOutUnknown: its owner's choice cannot be read yet (its pod
	// not in the informer's pod list, its namespace not readable, a pod
	// UID its cgroup does not give in UUID form): nothing is started in
	// it, and it is looked at again at each discovery.
	StateOptOutUnknown State = "opt_out_unknown"
	// StateRefused: attaching failed (no attach listener, JFR refused, too
	// many tries); not tried again until the JVM restarts.
	StateRefused State = "refused"
)

// States lists every state, in the order status counts are reported.
var States = []State{StateFound, StateRecordingOurs, StateRecordingTheirs, StateOptedOut, StateOptOutUnknown, StateRefused}

// Status is one JVM's state and why.
type Status struct {
	State State
	// Reason says why (what opted it out, why it was refused, whose
	// recording it is); may be "".
	Reason string
}
