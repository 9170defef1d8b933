package runtimecorrelationprocessor // import "github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"

import (
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
)

// indexTable is the processTable of a proc root: procresource.Index.
type indexTable struct {
	index *procresource.Index
}

// minRescan bounds the index's scans of the proc root on misses.
const minRescan = time.Second

func newIndexTable(procRoot string) *indexTable {
	return &indexTable{index: procresource.NewIndex(procresource.NewReader(procRoot, 0), minRescan)}
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

// seenAs reports whether a process in another pid namespace of the node
// sees itself as vpid (procresource.Index.SeenAs).
func (t *indexTable) seenAs(vpid int64) bool { return t.index.SeenAs(int(vpid)) }
