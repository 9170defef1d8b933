// Package doccheck compares what the documentation says with what the code
// does: the config keys a component's README documents with its Config's
// mapstructure tags, the metrics its README and documentation.md name with
// its metadata.yaml, and the environment variables an embedded
// configuration's header lists with its ${env:…} uses and the variables the
// collector's code reads. Each comparison returns its disagreements as
// [Problem]s, in both directions; the tests beside it run them on the
// repository, so that `make test` fails on docs that drift.
package doccheck // import "github.com/otelcol-ai/otelcol-ai/internal/doccheck"

import (
	"fmt"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Problem is one disagreement between a document and the code.
type Problem struct {
	// Doc is the document (a path relative to the repository root).
	Doc string
	// Msg says what disagrees and with what.
	Msg string
}

func (p Problem) String() string { return p.Doc + ": " + p.Msg }

// Strings returns the problems as "doc: msg" lines, sorted.
func Strings(ps []Problem) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	slices.Sort(out)
	return out
}

// Table is one Markdown table: its header cells and, per row, the first
// cell's backticked names (a cell may name several: `a`, `b`).
type Table struct {
	Header []string
	Names  [][]string
}

var backticked = regexp.MustCompile("`([^`]+)`")

// Tables returns the Markdown tables of md.
func Tables(md string) []Table {
	var (
		out []Table
		cur *Table
	)
	lines := strings.Split(md, "\n")
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			cur = nil
			continue
		}
		cells := splitRow(line)
		if cur == nil {
			// A header is a row followed by a |---| separator row.
			if i+1 < len(lines) && isSeparator(lines[i+1]) {
				out = append(out, Table{Header: cells})
				cur = &out[len(out)-1]
			}
			continue
		}
		if isSeparator(line) || len(cells) == 0 {
			continue
		}
		var names []string
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			names = append(names, m[1])
		}
		cur.Names = append(cur.Names, names)
	}
	return out
}

func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

func isSeparator(line string) bool {
	line = strings.TrimSpace(line)
	return strings.HasPrefix(line, "|") && strings.Trim(line, "|-: ") == ""
}

// column returns the names in the first column of md's tables whose first
// header cell is header (case-insensitive).
func column(md, header string) []string {
	var out []string
	for _, t := range Tables(md) {
		if len(t.Header) == 0 || !strings.EqualFold(t.Header[0], header) {
			continue
		}
		for _, names := range t.Names {
			out = append(out, names...)
		}
	}
	return out
}

// DocumentedKeys returns the config keys md documents: the first column of
// every table whose first header cell is "key".
func DocumentedKeys(md string) []string { return column(md, "key") }

// DocumentedMetrics returns the metric names md documents: the first
// column of every table whose first header cell is "metric", each without
// a trailing {attribute} list.
func DocumentedMetrics(md string) []string {
	var out []string
	for _, n := range column(md, "metric") {
		if i := strings.IndexByte(n, '{'); i > 0 {
			n = n[:i]
		}
		out = append(out, n)
	}
	return out
}

var placeholder = regexp.MustCompile(`<[^>]*>|\[[^\]]*\]`)

// normalize writes every placeholder segment (<name>, <model>) as <> and
// every index ([i], [0]) as [], so that one documented key names the
// same key however its placeholders are spelled.
func normalize(key string) string {
	return placeholder.ReplaceAllStringFunc(key, func(s string) string {
		if s[0] == '<' {
			return "<>"
		}
		return "[]"
	})
}

// CompareKeys reports, for doc, each documented key that is not a key of
// the config (and, when it is one written with dots, says so), and each
// key of the config that must be documented but is not. A documented key
// with a <placeholder> segment stands for every key with any segment there;
// a documented key covers the keys under it, and the key above it.
func CompareKeys(doc string, documented []string, keys []Key) []Problem {
	var problems []Problem
	known := map[string]bool{}
	for _, k := range keys {
		known[k.Path] = true
	}
	matches := func(pattern, key string) bool {
		ps, ks := strings.Split(pattern, "::"), strings.Split(key, "::")
		if len(ps) != len(ks) {
			return false
		}
		for i := range ps {
			if ps[i] != ks[i] && ps[i] != "<>" && ks[i] != "<>" {
				return false
			}
		}
		return true
	}
	var patterns []string
	for _, d := range documented {
		n := normalize(d)
		patterns = append(patterns, n)
		if known[n] || slices.ContainsFunc(keys, func(k Key) bool { return matches(n, k.Path) }) {
			continue
		}
		if dotted := strings.ReplaceAll(n, ".", "::"); known[dotted] {
			problems = append(problems, Problem{doc, fmt.Sprintf("config key %q is written with dots: write %q", d, dotted)})
			continue
		}
		problems = append(problems, Problem{doc, fmt.Sprintf("documents config key %q, which the config does not have", d)})
	}
	for _, k := range keys {
		if !k.MustDocument {
			continue
		}
		// A documented key covers the keys under it (a version policy's
		// forms are documented with it).
		parts := strings.Split(k.Path, "::")
		covered := false
		for n := len(parts); n > 0 && !covered; n-- {
			prefix := strings.Join(parts[:n], "::")
			covered = slices.ContainsFunc(patterns, func(p string) bool { return matches(p, prefix) })
		}
		// So does one under it (a list documented by its fields).
		for _, p := range patterns {
			covered = covered || strings.HasPrefix(p, k.Path+"::") || strings.HasPrefix(p, k.Path+"[]::")
		}
		if !covered {
			problems = append(problems, Problem{doc, fmt.Sprintf("does not document config key %q", k.Path)})
		}
	}
	return problems
}

// CompareMetrics reports each metric name documented that the code does
// not have, and each name the code has that is not documented; what is
// documented and what the code has are given by the caller.
func CompareMetrics(doc string, documented, code []string) []Problem {
	var problems []Problem
	for _, d := range documented {
		if !slices.Contains(code, d) {
			problems = append(problems, Problem{doc, fmt.Sprintf("documents metric %q, which the code does not emit", d)})
		}
	}
	for _, c := range code {
		if !slices.Contains(documented, c) {
			problems = append(problems, Problem{doc, fmt.Sprintf("does not document metric %q", c)})
		}
	}
	return problems
}

// GeneratedMetrics returns the metric names mdatagen's documentation.md
// gives a heading each ("### name").
func GeneratedMetrics(md string) []string {
	var out []string
	for _, line := range strings.Split(md, "\n") {
		if name, ok := strings.CutPrefix(line, "### "); ok {
			out = append(out, strings.TrimSpace(name))
		}
	}
	return out
}

// StringLiterals returns the string literals of the non-test Go files in
// dir and its subfolders (testdata left out): where a metric built by hand
// gets its name.
func StringLiterals(dir string) (map[string]bool, error) {
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != dir && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		files, err := parseDir(token.NewFileSet(), path)
		if err != nil {
			return err
		}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						out[s] = true
					}
				}
				return true
			})
		}
		return nil
	})
	return out, err
}

var (
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// mdPath is a relative path written as code (`../../internal/window`),
	// which a reader follows as a link.
	mdPath = regexp.MustCompile("`(\\.\\.?/[^`\\s]+)`")
)

// CheckLinks reports each relative link of the Markdown file doc (a path
// under root), and each relative path written as code (`../x`), that leads
// outside root or to nothing there. Links with a scheme and links within
// the page (#…) are not followed.
func CheckLinks(root, doc string) ([]Problem, error) {
	md, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		return nil, err
	}
	var problems []Problem
	found := append(mdLink.FindAllStringSubmatch(string(md), -1), mdPath.FindAllStringSubmatch(string(md), -1)...)
	for _, m := range found {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		target, _, _ = strings.Cut(target, "#")
		var path string
		if filepath.IsAbs(target) {
			path = filepath.Clean(target)
		} else {
			path = filepath.Join(root, filepath.Dir(doc), target)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			problems = append(problems, Problem{doc, fmt.Sprintf("links %q, outside the repository", m[1])})
			continue
		}
		if _, err := os.Stat(path); err != nil {
			problems = append(problems, Problem{doc, fmt.Sprintf("links %q, which does not exist", m[1])})
		}
	}
	return problems, nil
}
