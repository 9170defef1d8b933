package xlog // import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/xlog"

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
)

// PauseBean names the GarbageCollectorMXBean a logged pause counts under,
// as jvm.gc.name on the JFR source's windows and on jvm.gc.duration: the
// log's "Using …" collector and the pause's kind give the collector JFR
// would have named (G1New, ParallelOld, ZGC Minor, …), and
// jfrstream.CollectorOf, the one table, its bean. A generational ZGC pause
// counts under its collection's kind (major: whether its GC id was logged
// as a Major Collection; unknown, e.g. a log read from its middle: by the
// pause's generation, O major, or its "(Major)" mark). A collector it does not know keeps the
// log's name.
func PauseBean(using string, p Pause, major zgcKind) string {
	full := strings.HasPrefix(p.Name, "Pause Full")
	var jfrName string
	switch using {
	case "G1":
		switch {
		case full:
			jfrName = "G1Full"
		case strings.HasPrefix(p.Name, "Pause Remark"), strings.HasPrefix(p.Name, "Pause Cleanup"):
			jfrName = "G1Old" // the concurrent cycle's pauses
		default:
			jfrName = "G1New"
		}
	case "Parallel":
		jfrName = "ParallelScavenge"
		if full {
			jfrName = "ParallelOld"
		}
	case "Serial":
		jfrName = "DefNew"
		if full {
			jfrName = "SerialOld"
		}
	case "The Z Garbage Collector":
		switch {
		case p.Generation == "":
			jfrName = "Z"
		case major == zgcMajor || major == zgcUnknown && (p.Generation == "O" || strings.HasSuffix(p.Name, "(Major)")):
			jfrName = "ZGC Major"
		default:
			jfrName = "ZGC Minor"
		}
	case "Shenandoah":
		jfrName = "Shenandoah"
	default:
		return using
	}
	c := jfrstream.CollectorOf(jfrName)
	if c.Pauses != "" {
		return c.Pauses
	}
	return c.Name
}

// zgcKind is what the log said a generational ZGC collection was.
type zgcKind int

const (
	zgcUnknown zgcKind = iota
	zgcMajor
	zgcMinor
)

// maxZGCKinds bounds the collections remembered: ZGC runs several
// concurrently, never dozens.
const maxZGCKinds = 64

// zgcKinds remembers the kind of the latest generational ZGC collections,
// from their "GC(n) Major Collection (…)" / "Minor Collection" lines.
type zgcKinds struct {
	kinds map[int64]zgcKind
	order []int64
}

var zgcCollection = regexp.MustCompile(`^GC\((\d+)\) (Major|Minor) Collection \(`)

// note reads a gc-tagged message.
func (z *zgcKinds) note(msg string) {
	if !strings.Contains(msg, " Collection (") {
		return
	}
	m := zgcCollection.FindStringSubmatch(msg)
	if m == nil {
		return
	}
	id, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return
	}
	if z.kinds == nil {
		z.kinds = map[int64]zgcKind{}
	}
	if _, ok := z.kinds[id]; !ok {
		z.order = append(z.order, id)
		if len(z.order) > maxZGCKinds {
			delete(z.kinds, z.order[0])
			z.order = z.order[1:]
		}
	}
	z.kinds[id] = zgcMinor
	if m[2] == "Major" {
		z.kinds[id] = zgcMajor
	}
}

// major returns what the log said collection id was.
func (z *zgcKinds) major(id int64) zgcKind { return z.kinds[id] }
