package timeline // import "github.com/otelcol-ai/otelcol-ai/pkg/timeline"

// Snapshot is what the page draws for one time range. Times inside it are
// nanoseconds after Base (Unix epoch ns), so that they stay exact as
// JavaScript numbers.
type Snapshot struct {
	// Source names where it came from: a component ID or a file.
	Source string `json:"source"`
	// Base is the Unix epoch ns every other time is relative to, a whole
	// millisecond; BaseMs is the same in ms (exact as a JavaScript number).
	Base   int64 `json:"base"`
	BaseMs int64 `json:"baseMs"`
	// From and To are the range asked for, relative to Base.
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Lanes are the lane groups: one per process (or pod, or node, as the
	// source matches).
	Lanes []Lane `json:"lanes"`
	// Windows are the runtime windows in range, unless there were more
	// than the query allowed: then Summary holds them instead.
	Windows []Window `json:"windows"`
	// Summary is Windows binned per lane, kind and time bucket, when there
	// are too many to draw one by one.
	Summary []Bucket `json:"summary,omitempty"`
	// Spans are the request spans in range, the newest first when capped.
	Spans []Span `json:"spans"`
	// GPU is GPU memory per process over time, where NVML reports it.
	GPU []GPUPoint `json:"gpu"`
	// Accounts are JVM memory accounts per process over time (the jfr
	// receiver's), drawn on the lane beside the GPU memory.
	Accounts []AccountPoint `json:"accounts"`
	// WindowsInRange counts the windows in range before summarising.
	WindowsInRange int `json:"windowsInRange"`
	// SpansDropped counts spans in range left out by Query.MaxSpans.
	SpansDropped int `json:"spansDropped,omitempty"`
	// Recording says whether spans, thread names and GPU memory are
	// recorded beside the windows (the runtimecorrelation processor always
	// records them; a page from a source that does not says so).
	Recording bool `json:"recording"`
}

// Lane is one lane group: a process with what identifies it.
type Lane struct {
	ID int `json:"id"`
	// Name is what the page shows: pod/container/executable, as known.
	Name          string `json:"name"`
	Node          string `json:"node,omitempty"`
	PID           int64  `json:"pid,omitempty"`
	VPID          int64  `json:"vpid,omitempty"`
	ContainerID   string `json:"containerId,omitempty"`
	PodUID        string `json:"podUid,omitempty"`
	PodName       string `json:"pod,omitempty"`
	ContainerName string `json:"container,omitempty"`
	Executable    string `json:"executable,omitempty"`
	Runtime       string `json:"runtime,omitempty"`
	Service       string `json:"service,omitempty"`
	// Threads names the lane's threads by id, where known.
	Threads map[int64]string `json:"threads,omitempty"`
}

// Window is one runtime window.
type Window struct {
	Lane  int    `json:"lane"`
	Kind  string `json:"kind"`
	Start int64  `json:"s"`
	Dur   int64  `json:"d"`
	TID   int64  `json:"tid,omitempty"`
	// Detail is the VM operation of a safepoint, the collector of a GC
	// pause, the cause of a GIL wait, the generation of a Python GC.
	Detail string `json:"detail,omitempty"`
	// Cause is a JVM GC pause's cause.
	Cause string `json:"cause,omitempty"`
}

// Span is one request span with the windows that overlapped it.
type Span struct {
	Lane    int    `json:"lane"`
	TraceID string `json:"trace"`
	SpanID  string `json:"span"`
	Name    string `json:"name"`
	Start   int64  `json:"s"`
	Dur     int64  `json:"d"`
	// Overlap is, per window kind, the overlapped time and window count:
	// the span's runtime.overlap.<kind>.duration and .count.
	Overlap map[string]OverlapTotal `json:"overlap,omitempty"`
	// Scores are the span's inference.* attributes.
	Scores map[string]any `json:"scores,omitempty"`
}

// OverlapTotal is the windows of one kind that overlapped a span.
type OverlapTotal struct {
	Duration int64 `json:"duration"`
	Count    int64 `json:"count"`
}

// GPUPoint is one reading of a process's GPU memory on one device.
type GPUPoint struct {
	Lane   int    `json:"lane"`
	Device string `json:"device,omitempty"`
	T      int64  `json:"t"`
	Bytes  int64  `json:"bytes"`
}

// Bucket summarises the windows of one lane and kind in one time bucket.
type Bucket struct {
	Lane  int    `json:"lane"`
	Kind  string `json:"kind"`
	Start int64  `json:"s"`
	Dur   int64  `json:"d"`
	Count int    `json:"count"`
	// Busy is the windows' summed duration within the bucket.
	Busy int64 `json:"busy"`
}

// SetBase sets Base and BaseMs to the whole millisecond at or before ns.
func (s *Snapshot) SetBase(ns int64) {
	s.BaseMs = ns / 1e6
	if ns < 0 && ns%1e6 != 0 {
		s.BaseMs--
	}
	s.Base = s.BaseMs * 1e6
}

// Summarize replaces s.Windows with s.Summary when there are more than
// limit of them, in buckets equal parts of [From, To).
func (s *Snapshot) Summarize(limit, buckets int) {
	s.WindowsInRange = len(s.Windows)
	if len(s.Windows) <= limit {
		return
	}
	if buckets < 1 {
		buckets = 1
	}
	span := s.To - s.From
	if span <= 0 {
		span = 1
	}
	width := (span + int64(buckets) - 1) / int64(buckets)
	type key struct {
		lane   int
		kind   string
		bucket int64
	}
	at := map[key]int{}
	for _, w := range s.Windows {
		first := max(0, (w.Start-s.From)/width)
		last := min(int64(buckets-1), (w.Start+w.Dur-s.From)/width)
		for b := first; b <= last; b++ {
			lo, hi := s.From+b*width, s.From+(b+1)*width
			busy := min(hi, w.Start+w.Dur) - max(lo, w.Start)
			k := key{w.Lane, w.Kind, b}
			i, ok := at[k]
			if !ok {
				i = len(s.Summary)
				at[k] = i
				s.Summary = append(s.Summary, Bucket{Lane: w.Lane, Kind: w.Kind, Start: lo, Dur: width})
			}
			if b == first {
				s.Summary[i].Count++
			}
			s.Summary[i].Busy += max(0, busy)
		}
	}
	s.Windows = []Window{}
}
