package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

// indexTable is the processTable of a proc root: procresource.Index, plus
// the set of pids that processes in other pid namespaces see themselves as,
// which the index does not expose.
type indexTable struct {
	index  *procresource.Index
	reader *procresource.Reader

	mu      sync.Mutex
	vpids   map[int64]struct{}
	builtAt time.Time
	now     func() time.Time
}

// minRescan bounds the scans of the proc root on misses, the index's and
// the vpid set's alike.
const minRescan = time.Second

func newIndexTable(procRoot string) *indexTable {
	r := procresource.NewReader(procRoot, 0)
	return &indexTable{index: procresource.NewIndex(r, minRescan), reader: r, now: time.Now}
}

func fromIdentity(id procresource.Identity) process {
	return process{pid: int64(id.PID), vpid: int64(id.VPID), startTicks: id.StartTicks, containerID: id.ContainerID, podUID: id.PodUID}
}

func (t *indexTable) byHostPID(pid int64) (process, bool) {
	id, ok := t.index.ByHostPID(int(pid))
	return fromIdentity(id), ok
}

func (t *indexTable) byContainer(containerID string, vpid int64) (process, bool) {
	id, ok := t.index.ByContainer(containerID, int(vpid))
	return fromIdentity(id), ok
}

func (t *indexTable) byPod(podUID string, vpid int64) []process {
	ids := t.index.ByPod(podUID, int(vpid))
	out := make([]process, len(ids))
	for i, id := range ids {
		out[i] = fromIdentity(id)
	}
	return out
}

// seenAs answers from a set of the vpids of processes in other pid
// namespaces, rebuilt at most once per minRescan: a process that started
// since is not seen, which leaves a span matched to the host process it
// names (as before the process started).
func (t *indexTable) seenAs(vpid int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now := t.now(); t.vpids == nil || now.Sub(t.builtAt) >= minRescan {
		t.builtAt = now
		t.vpids = t.scanVPIDs()
	}
	_, ok := t.vpids[vpid]
	return ok
}

func (t *indexTable) scanVPIDs() map[int64]struct{} {
	out := map[int64]struct{}{}
	dir, err := os.Open(t.reader.Root())
	if err != nil {
		return out
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return out
	}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		id, err := t.reader.Identity(pid)
		if err != nil || id.VPID <= 0 || id.VPID == id.PID {
			continue // exited, unreadable, or in the node's namespace
		}
		out[int64(id.VPID)] = struct{}{}
	}
	return out
}
