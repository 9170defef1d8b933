// Command timeline renders the file exporter's output (traces.jsonl,
// metrics.jsonl, logs.jsonl, as `make run` writes them to out/) into one
// static HTML file: the timeline page with the recording inside it, for
// sharing in a ticket. It needs nothing at view time: no server, no
// network.
//
//	timeline [-o timeline.html] [-max-windows 5000] [DIR | FILE.jsonl...]
//
// A directory stands for its traces.jsonl, metrics.jsonl and logs.jsonl
// (those present, rotated backups included); files are read by their
// name's kind (traces, metrics or logs in the name). The default input is
// out/.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/otelcol-ai/otelcol-ai/pkg/timeline"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "timeline:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, log io.Writer) error {
	fs := flag.NewFlagSet("timeline", flag.ContinueOnError)
	fs.SetOutput(log)
	out := fs.String("o", "timeline.html", "the HTML file to write (- for stdout)")
	maxWindows := fs.Int("max-windows", 5000, "windows drawn one by one in view before the page draws a summary")
	title := fs.String("title", "", "the page's title (default: the inputs)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *maxWindows < 1 {
		return usageError{"-max-windows: must be at least 1"}
	}
	inputs := fs.Args()
	if len(inputs) == 0 {
		inputs = []string{"out"}
	}
	files, err := expand(inputs)
	if err != nil {
		return err
	}
	rec := timeline.NewRecording()
	// Logs first: their windows name the processes that spans and GPU
	// memory then join.
	slices.SortStableFunc(files, func(a, b input) int { return a.order - b.order })
	for _, f := range files {
		if err := readFile(rec, f); err != nil {
			return err
		}
	}
	name := *title
	if name == "" {
		name = "timeline of " + strings.Join(inputs, ", ")
	}
	// Every window goes in the file: the page summarises what is in view
	// by itself, so that zooming in on a file shows each window.
	snap := rec.Snapshot(strings.Join(inputs, ", "), 0, 0)
	w := io.Writer(os.Stdout)
	var file *os.File
	if *out != "-" {
		if file, err = os.Create(*out); err != nil {
			return err
		}
		w = file
	}
	err = timeline.Render(w, timeline.PageOptions{Title: name, MaxWindows: *maxWindows, Data: snap})
	if file != nil {
		err = errors.Join(err, file.Close())
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "timeline: %d processes, %d windows, %d spans, %d GPU points (%d records skipped) -> %s\n",
		len(snap.Lanes), len(snap.Windows), len(snap.Spans), len(snap.GPU), rec.Skipped, *out)
	return nil
}

type input struct {
	path  string
	kind  string
	order int
}

var kindOrder = map[string]int{"logs": 0, "traces": 1, "metrics": 2}

// expand turns the arguments into files with their kinds.
func expand(args []string) ([]input, error) {
	var files []input
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			k, ok := kindOf(a)
			if !ok {
				return nil, usageError{fmt.Sprintf("%s: name says neither traces, metrics nor logs", a)}
			}
			files = append(files, input{a, k, kindOrder[k]})
			continue
		}
		found := 0
		for k := range kindOrder {
			matches, _ := filepath.Glob(filepath.Join(a, k+"*.jsonl"))
			slices.Sort(matches)
			for _, m := range matches {
				files = append(files, input{m, k, kindOrder[k]})
				found++
			}
		}
		if found == 0 {
			return nil, fmt.Errorf("%s: no traces*.jsonl, metrics*.jsonl or logs*.jsonl in it", a)
		}
	}
	return files, nil
}

func kindOf(path string) (string, bool) {
	base := filepath.Base(path)
	for k := range kindOrder {
		if strings.Contains(base, k) {
			return k, true
		}
	}
	return "", false
}

func readFile(rec *timeline.Recording, in input) error {
	f, err := os.Open(in.path)
	if err != nil {
		return err
	}
	defer f.Close()
	switch in.kind {
	case "logs":
		err = rec.ReadLogs(f)
	case "traces":
		err = rec.ReadTraces(f)
	default:
		err = rec.ReadMetrics(f)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", in.path, err)
	}
	return nil
}
