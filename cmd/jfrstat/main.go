// Command jfrstat looks inside Java Flight Recorder files without a JVM.
//
//	jfrstat summary FILE...                    per event type: count and size, like `jfr summary`
//	jfrstat print --json [--events a,b] [--stack-depth n] FILE
//	                                           events as JSON, like `jfr print --json`
//
// Event names in --events may omit the "jdk." prefix, as with the JDK tool.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/otelcol-ai/otelcol-ai/pkg/jfr"
	"github.com/otelcol-ai/otelcol-ai/pkg/jfr/jfrprint"
)

const usage = `usage:
  jfrstat summary FILE...
  jfrstat print --json [--events NAME,...] [--stack-depth N] FILE
`

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "jfrstat:", err)
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command"}
	}
	out := bufio.NewWriterSize(stdout, 256<<10)
	defer out.Flush()
	switch args[0] {
	case "summary":
		return summary(args[1:], out)
	case "print":
		return printJSON(args[1:], out)
	case "help", "-h", "--help":
		fmt.Fprint(out, usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

func summary(files []string, out *bufio.Writer) error {
	if len(files) == 0 {
		return usageError{"summary needs a file"}
	}
	for i, path := range files {
		if len(files) > 1 {
			if i > 0 {
				fmt.Fprintln(out)
			}
			fmt.Fprintf(out, "%s:\n", path)
		}
		if err := summarizeFile(path, out); err != nil {
			return err
		}
	}
	return nil
}

func summarizeFile(path string, out io.Writer) error {
	r, err := jfr.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	s, err := jfrprint.Summarize(r)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	_, err = s.WriteTo(out)
	return err
}

// printMemoryLimit is the Go heap's soft limit while printing.
const printMemoryLimit = 48 << 20

func printJSON(args []string, out *bufio.Writer) error {
	fs := flag.NewFlagSet("print", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	events := fs.String("events", "", "comma-separated event names")
	depth := fs.Int("stack-depth", 5, "frames per stack trace")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if !*asJSON {
		return usageError{"only --json output is supported"}
	}
	if fs.NArg() != 1 {
		return usageError{"print needs exactly one file"}
	}
	path := fs.Arg(0)
	p := &jfrprint.JSON{StackDepth: *depth}
	if *events != "" {
		want := map[string]bool{}
		for _, e := range strings.Split(*events, ",") {
			if e = strings.TrimSpace(e); e != "" {
				want[e] = true
			}
		}
		p.Accept = func(t *jfr.Type) bool {
			return want[t.Name] || want[strings.TrimPrefix(t.Name, "jdk.")]
		}
	}
	r, err := jfr.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	if os.Getenv("GOMEMLIMIT") == "" {
		// Printing holds about twice the largest chunk (HotSpot rotates at
		// 12 MB); collecting before the heap doubles keeps the process
		// under 64 MB on any recording of such chunks.
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(printMemoryLimit))
	}
	if err := p.Print(out, r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
