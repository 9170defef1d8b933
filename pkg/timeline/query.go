package timeline // import "github.com/otelcol-ai/otelcol-ai/pkg/timeline"

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
)

// Query says which part of a source's state to copy.
type Query struct {
	// From and To bound the range, Unix epoch ns; To 0 means the source's
	// newest data, From 0 means To minus Last.
	From, To int64
	// Last is the range's length when From is 0.
	Last time.Duration
	// Pod, when set, keeps only lanes whose pod name or UID it is.
	Pod string
	// PID, when not 0, keeps only lanes of that process (host pid).
	PID int64
	// Kinds, when not empty, keeps only these window kinds; "span" and
	// "gpu" name spans and GPU memory.
	Kinds []string
	// MaxWindows is the most windows returned one by one; more are
	// summarised in Buckets buckets.
	MaxWindows int
	Buckets    int
	// MaxSpans is the most spans returned, the newest first.
	MaxSpans int
}

// Query limits: what a caller may ask for at most.
const (
	MaxQueryWindows = 100_000
	MaxQuerySpans   = 100_000
	MaxQueryBuckets = 10_000
	MaxQueryRange   = 24 * time.Hour
)

// Kinds a query may filter on besides the window kinds.
const (
	KindSpan = "span"
	KindGPU  = "gpu"
)

// ErrBadQuery is wrapped by ParseQuery's errors.
var ErrBadQuery = errors.New("bad query")

// ParseQuery reads a query from URL parameters: from, to (Unix epoch ns,
// or RFC 3339), last (a duration), pod, pid, kind (repeated or
// comma-separated), max_windows, buckets, max_spans. Unset ones take def's
// values. Every bad parameter is reported, each by name.
func ParseQuery(v url.Values, def Query) (Query, error) {
	q := def
	var errs []error
	bad := func(name, why string) { errs = append(errs, fmt.Errorf("%s: %s", name, why)) }
	for name := range v {
		if !slices.Contains([]string{"from", "to", "last", "pod", "pid", "kind", "max_windows", "buckets", "max_spans"}, name) {
			bad(name, "unknown parameter")
		}
	}
	single := func(name string) (string, bool) {
		vals, ok := v[name]
		if !ok {
			return "", false
		}
		if len(vals) != 1 {
			bad(name, "given more than once")
			return "", false
		}
		return vals[0], true
	}
	for _, t := range []struct {
		name string
		dst  *int64
	}{{"from", &q.From}, {"to", &q.To}} {
		if s, ok := single(t.name); ok {
			ns, err := parseTime(s)
			if err != nil {
				bad(t.name, err.Error())
			} else {
				*t.dst = ns
			}
		}
	}
	if s, ok := single("last"); ok {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			bad("last", fmt.Sprintf("%q is not a duration (e.g. 30s, 5m)", s))
		case d <= 0 || d > MaxQueryRange:
			bad("last", fmt.Sprintf("%s is outside (0, %s]", d, MaxQueryRange))
		default:
			q.Last = d
		}
	}
	if s, ok := single("pod"); ok {
		q.Pod = s
	}
	if s, ok := single("pid"); ok {
		pid, err := strconv.ParseInt(s, 10, 64)
		if err != nil || pid <= 0 {
			bad("pid", fmt.Sprintf("%q is not a positive integer", s))
		} else {
			q.PID = pid
		}
	}
	if vals, ok := v["kind"]; ok {
		q.Kinds = nil
		for _, val := range vals {
			for k := range strings.SplitSeq(val, ",") {
				if k != KindSpan && k != KindGPU && k != KindAccounts && !window.Kind(k).Known() {
					bad("kind", fmt.Sprintf("%q is not span, gpu, accounts or a window kind (%v)", k, window.Kinds()))
					continue
				}
				q.Kinds = append(q.Kinds, k)
			}
		}
	}
	for _, n := range []struct {
		name string
		dst  *int
		max  int
	}{{"max_windows", &q.MaxWindows, MaxQueryWindows}, {"buckets", &q.Buckets, MaxQueryBuckets}, {"max_spans", &q.MaxSpans, MaxQuerySpans}} {
		if s, ok := single(n.name); ok {
			i, err := strconv.Atoi(s)
			if err != nil || i < 1 || i > n.max {
				bad(n.name, fmt.Sprintf("%q is not an integer in [1, %d]", s, n.max))
			} else {
				*n.dst = i
			}
		}
	}
	if q.From != 0 && q.To != 0 {
		switch {
		case q.From >= q.To:
			bad("from", "must be before to")
		case q.To-q.From > int64(MaxQueryRange):
			bad("from", fmt.Sprintf("range longer than %s", MaxQueryRange))
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return def, fmt.Errorf("%w: %w", ErrBadQuery, errors.Join(errs...))
	}
	return q, nil
}

func parseTime(s string) (int64, error) {
	if ns, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ns <= 0 {
			return 0, fmt.Errorf("%q is not after the epoch", s)
		}
		return ns, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither Unix epoch ns nor RFC 3339", s)
	}
	return t.UnixNano(), nil
}

// WantsKind reports whether the query keeps kind.
func (q Query) WantsKind(kind string) bool {
	return len(q.Kinds) == 0 || slices.Contains(q.Kinds, kind)
}

// WantsLane reports whether the query keeps a lane.
func (q Query) WantsLane(l Lane) bool {
	if q.PID != 0 && l.PID != q.PID {
		return false
	}
	return q.Pod == "" || l.PodName == q.Pod || l.PodUID == q.Pod
}

// Range resolves the query's range against the newest time a source has.
func (q Query) Range(newest int64) (from, to int64) {
	to = q.To
	if to == 0 {
		to = newest
	}
	from = q.From
	if from == 0 {
		from = to - int64(q.Last)
	}
	return from, to
}
