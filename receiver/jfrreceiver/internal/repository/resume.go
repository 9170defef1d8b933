package repository

import (
	"encoding/binary"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// Position is where the reading of one repository stands: enough for a
// later run to go on without sending a window twice or skipping one.
//
// A chunk cannot be read from the middle (its metadata and constant pools
// are at its start and in each flush), so a resumed repository is read
// again from the start of the chunk it was reading (found by the start
// time its header names), and the windows the last run sent from that
// chunk, kept as hashes, are dropped.
type Position struct {
	// StartTicks is the JVM's start time (/proc/<pid>/stat), 0 for a
	// pattern's folder: a position is only used for the same JVM.
	StartTicks uint64 `json:"start_ticks,omitempty"`
	// ChunkStart is the start (Unix ns, the chunk header's) of the chunk
	// to read again: the one read last, or an earlier one holding the
	// first events of a window not built yet (a safepoint begun before a
	// chunk rotation and ended after it).
	ChunkStart int64 `json:"chunk_start"`
	// Done says the repository was read to its end (a preserved one whose
	// JVM exited): it is not read again.
	Done bool `json:"done,omitempty"`
	// Sent are the hashes (windowKey) of the windows sent that reading
	// from that chunk on would build again, sorted.
	Sent []uint64 `json:"sent,omitempty"`
}

// resumeState is a follower's checkpoint: the chunk to read again after a
// restart, the windows sent that doing so would build again (hash → start),
// the windows to drop (sent before a restart), the position resumed from
// until a chunk is opened, how many were dropped, and the starts of the
// chunks opened last (oldest first).
type resumeState struct {
	ckChunk int64
	sent    map[uint64]int64
	skip    map[uint64]bool
	resumed *Position
	dropped int
	opened  []int64
}

// maxOpened bounds the chunk starts a follower remembers: a window held
// back for longer than that many chunks is rebuilt from the oldest.
const maxOpened = 16

// sentSlack keeps a sent window remembered for this long before the
// checkpoint's chunk starts. Reading from a chunk builds again the windows
// whose first event is in it or later, and their start is no earlier than
// the chunk's unless an event spans the rotation (which pauses and
// safepoints, themselves at a safepoint as the rotation is, do not); the
// slack covers any that does.
const sentSlack = int64(time.Minute)

// maxSent bounds the windows remembered per repository (about 1.7 MB of
// checkpoint as JSON): a chunk with more sent is remembered for its first
// maxSent only, and a restart in it may send the rest again.
const maxSent = 100_000

// Positions returns where every followed repository stands, by folder, as
// of its last poll that ended.
func (s *Source) Positions() map[string]Position {
	out := make(map[string]Position, len(s.followers))
	for dir, f := range s.followers {
		if f.ckChunk == 0 {
			if f.resumed != nil { // no chunk opened since the restart
				out[dir] = *f.resumed
			}
			continue
		}
		sent := make([]uint64, 0, len(f.sent))
		for h := range f.sent {
			sent = append(sent, h)
		}
		slices.Sort(sent)
		out[dir] = Position{StartTicks: f.jvm.StartTicks, ChunkStart: f.ckChunk, Sent: sent}
	}
	for dir := range s.ended {
		if _, ok := out[dir]; !ok {
			out[dir] = Position{StartTicks: s.endedTicks[dir], Done: true}
		}
	}
	return out
}

// endedBefore says whether the last run read c's repository to its end;
// it is then not read again.
func (s *Source) endedBefore(c candidate) bool {
	pos, ok := s.cfg.Resume[c.dir]
	if !ok || !pos.Done || pos.StartTicks != c.jvm.StartTicks {
		return false
	}
	delete(s.cfg.Resume, c.dir)
	s.ended[c.dir] = true
	s.endedTicks[c.dir] = c.jvm.StartTicks
	return true
}

// resume makes f read on from pos: the chunk pos names (or the first one
// after it, when it is gone), dropping the windows pos says were sent.
func (f *follower) resume(pos Position) {
	f.newest = false
	f.resumed = &pos
	f.lastStart = pos.ChunkStart - 1
	f.skip = make(map[uint64]bool, len(pos.Sent))
	for _, h := range pos.Sent {
		f.skip[h] = true
	}
}

// sentOnly drops from b the windows a resumed follower sent before the
// restart, and remembers those it lets through, for Positions. It runs
// after each poll that ended, on the source's goroutine (as Positions).
func (f *follower) sentOnly(b *jvmevent.Batch) {
	if f.from != 0 {
		if ck := f.checkpointChunk(); ck != f.ckChunk {
			// The chunks before ck are never read again: the windows
			// begun in them are not built again.
			f.ckChunk = ck
			if f.sent == nil {
				f.sent = map[uint64]int64{}
			}
			maps.DeleteFunc(f.sent, func(_ uint64, start int64) bool { return start < ck-sentSlack })
		}
	}
	kept := b.Windows[:0]
	for _, w := range b.Windows {
		h := windowKey(w)
		if len(f.sent) < maxSent && f.sent != nil {
			f.sent[h] = w.Start
		}
		if f.skip[h] {
			f.dropped++
			continue
		}
		kept = append(kept, w)
	}
	clear(b.Windows[len(kept):])
	b.Windows = kept
}

// noteOpened remembers the start of a chunk just opened.
func (f *follower) noteOpened(start int64) {
	if len(f.opened) == maxOpened {
		f.opened = slices.Delete(f.opened, 0, 1)
	}
	f.opened = append(f.opened, start)
}

// checkpointChunk is the chunk a restart reads again: the one read last,
// or the one holding the first events of the oldest window the stream
// holds back (its start's chunk: the latest opened that starts no later).
// It never goes back: the windows before the last one chosen are
// forgotten.
func (f *follower) checkpointChunk() int64 {
	ck := f.lastStart
	if oldest, ok := f.stream.OldestPending(); ok && len(f.opened) > 0 {
		ck = f.opened[0]
		for _, start := range f.opened {
			if start <= oldest {
				ck = start
			}
		}
	}
	return max(ck, f.ckChunk)
}

// windowKey hashes what tells a window of one JVM from the others: its
// kind, start and ids. Not its duration: a safepoint sent before its
// jdk.SafepointEnd was flushed ends at its VM operation's end, and the
// same safepoint read again later at SafepointEnd's.
func windowKey(w window.Window) uint64 {
	h := fnv.New64a()
	var buf [8]byte
	put := func(v int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(v))
		h.Write(buf[:])
	}
	h.Write([]byte(w.Kind))
	put(w.Start)
	for _, k := range []string{window.AttrJVMGCID, window.AttrJVMSafepointID, jfrstream.AttrGCPhase} {
		switch v := w.Attributes[k].(type) {
		case int64:
			put(v)
		case int:
			put(int64(v))
		case string:
			h.Write([]byte(v))
		default:
			put(math.MinInt64)
		}
	}
	return h.Sum64()
}
