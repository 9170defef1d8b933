package docs

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// externalURL is a URL a markdown renderer would link: GitHub links bare
// URLs in text too, not only [text](url), [ref]: url and <url>.
var externalURL = regexp.MustCompile(`(?i)\b(?:https?|ftp)://[^\s)>\]"'` + "`" + `]+|\bwww\.[a-z0-9-]+\.[a-z]`)

// externalLinks returns the external URLs of a markdown text with their
// line numbers, outside fenced code blocks and inline code spans (where a
// URL is a value to type, e.g. an endpoint in a config example).
func externalLinks(md string) []string {
	var out []string
	fence := ""
	for i, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, u := range externalURL.FindAllString(withoutCodeSpans(line), -1) {
			out = append(out, strconv.Itoa(i+1)+": "+u)
		}
	}
	return out
}

// withoutCodeSpans drops the `code spans` of a line (any run of backticks
// closed by the same run).
func withoutCodeSpans(line string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		n := len(line[i:]) - len(strings.TrimLeft(line[i:], "`"))
		ticks := line[i : i+n]
		rest := line[i+n:]
		j := strings.Index(rest, ticks)
		if j < 0 { // unclosed: literal backticks
			b.WriteString(ticks)
			line = rest
			continue
		}
		line = rest[j+n:]
	}
}

func TestExternalLinksDetected(t *testing.T) {
	tests := []struct {
		name string
		md   string
		want int
	}{
		{"inline link", "see [OTTL](https://github.com/x/y) here", 1},
		{"reference definition", "[development]: https://example.org/stability#dev", 1},
		{"autolink", "<http://example.org>", 1},
		{"bare URL, which GitHub links", "at https://example.org/a and http://b.example", 2},
		{"www without a scheme", "www.example.org", 1},
		{"relative link", "[gpu-check](../../cmd/gpucheck/gpu-check.sh)", 0},
		{"plain text name", "the OpenTelemetry semantic conventions for JVM metrics", 0},
		{"code span", "(`OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317`)", 0},
		{"code span of two backticks", "``a ` https://x.example``", 0},
		{"fenced block", "```yaml\nvalue: http://$(HOST_IP):4317\n```\n", 0},
		{"after a fenced block", "~~~\nhttps://in.example\n~~~\nhttps://out.example", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := externalLinks(tt.md); len(got) != tt.want {
				t.Errorf("externalLinks(%q) = %q, want %d", tt.md, got, tt.want)
			}
		})
	}
}

// TestNoExternalLinks reads every tracked markdown file of the repository.
func TestNoExternalLinks(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	files := markdownFiles(t, root)
	if len(files) < 5 {
		t.Fatalf("found only %d markdown files under %s", len(files), root)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			if os.IsNotExist(err) { // tracked, deleted in the work tree
				continue
			}
			t.Fatal(err)
		}
		for _, l := range externalLinks(string(b)) {
			t.Errorf("%s:%s leaves the repository; refer to a file here or name it in plain text", f, l)
		}
	}
}

// markdownFiles lists the tracked markdown files, relative to root; outside
// a git checkout (a source tarball) every markdown file but those in
// hidden and build folders.
func markdownFiles(t *testing.T, root string) []string {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--", "*.md").Output()
	if err == nil {
		var files []string
		for _, f := range bytes.Split(out, []byte{0}) {
			if len(f) > 0 {
				files = append(files, string(f))
			}
		}
		return files
	}
	t.Logf("git ls-files: %v; walking %s instead", err, root)
	var files []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != root && (strings.HasPrefix(name, ".") || name == "dist" || name == "out") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
