package jfrprint

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
)

// TypeSummary is the count and total size of the records of one type.
type TypeSummary struct {
	Name  string
	Count int64
	Bytes int64
}

// Summary is what `jfr summary` reports about a recording.
type Summary struct {
	Major, Minor  uint16
	Chunks        int
	StartNanos    int64 // first chunk's start, Unix epoch ns
	DurationNanos int64 // sum over chunks
	Types         []TypeSummary
	nameWidth     int
}

// Summarize counts the records of every type in every chunk of r, without
// decoding them. Metadata and checkpoint records count as jdk.Metadata and
// jdk.Checkpoint, records of undeclared types as "<id> (missing event
// metadata)", and event types declared but never recorded with count 0.
func Summarize(r *jfr.Reader) (*Summary, error) {
	cs := r.Chunks()
	first := cs[0].Header
	s := &Summary{Major: first.Major, Minor: first.Minor, Chunks: len(cs), StartNanos: first.StartNanos}
	prefix := "jdk."
	if first.Major == 1 {
		prefix = "com.oracle.jdk."
	}
	byID := map[int64]int{}
	add := func(id int64, name string) int {
		if i, ok := byID[id]; ok {
			return i
		}
		byID[id] = len(s.Types)
		s.Types = append(s.Types, TypeSummary{Name: name})
		return len(s.Types) - 1
	}
	add(0, prefix+"Metadata")
	add(1, prefix+"Checkpoint")
	for i := range cs {
		c, err := r.Chunk(i)
		if err != nil {
			return nil, err
		}
		for _, t := range c.Metadata.EventTypes {
			add(t.ID, t.Name)
			s.nameWidth = max(s.nameWidth, len(t.Name))
		}
		s.DurationNanos += c.Header.DurationNanos
		stats, err := c.Stats()
		if err != nil {
			return nil, err
		}
		for _, st := range stats {
			if st.Count == 0 {
				continue
			}
			name := fmt.Sprintf("%d (missing event metadata)", st.ID)
			k := add(st.ID, name)
			s.Types[k].Count += st.Count
			s.Types[k].Bytes += st.Bytes
		}
	}
	// The JDK 21+ order: by count, descending, ties by name.
	sort.SliceStable(s.Types, func(a, b int) bool {
		ta, tb := s.Types[a], s.Types[b]
		if ta.Count != tb.Count {
			return ta.Count > tb.Count
		}
		return ta.Name < tb.Name
	})
	return s, nil
}

// WriteTo writes the summary in the format of `jfr summary`.
func (s *Summary) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	start := time.Unix(0, s.StartNanos).UTC()
	fmt.Fprintf(&b, "\n Version: %d.%d\n", s.Major, s.Minor)
	fmt.Fprintf(&b, " Chunks: %d\n", s.Chunks)
	fmt.Fprintf(&b, " Start: %s (UTC)\n", start.Format("2006-01-02 15:04:05"))
	fmt.Fprintf(&b, " Duration: %d s\n\n", (s.DurationNanos+500_000_000)/1_000_000_000)
	const header = "      Count  Size (bytes) "
	const typeHeader = " Event Type"
	width := max(s.nameWidth, len(typeHeader))
	b.WriteString(typeHeader + strings.Repeat(" ", width-len(typeHeader)) + header + "\n")
	b.WriteString(strings.Repeat("=", width+len(header)) + "\n")
	for _, t := range s.Types {
		fmt.Fprintf(&b, " %-*s%10d  %12d\n", width, t.Name, t.Count, t.Bytes)
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}
