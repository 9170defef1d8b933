package doccheck // import "github.com/otelcol-ai/otelcol-ai/internal/doccheck"

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Header is what an embedded configuration's leading comment says of
// environment variables: those substituted into the file, and those the
// components read from the collector's environment, each with the default
// it names.
type Header struct {
	Substituted map[string]string
	Read        map[string]string
}

var (
	headerEntry = regexp.MustCompile(`^#\s{2,}([A-Z][A-Z0-9_]+)\s+(\S+)`)
	envUse      = regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`)
)

// ParseHeader reads the leading comment of a configuration: entries
// ("#   NAME   default   meaning") after a line that says "substituted"
// are substituted, after one that says "read by" read by the components.
func ParseHeader(yaml string) Header {
	h := Header{Substituted: map[string]string{}, Read: map[string]string{}}
	var section map[string]string
	for _, line := range strings.Split(yaml, "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		lower := strings.ToLower(line)
		switch {
		case strings.Contains(lower, "substituted"):
			section = h.Substituted
		case strings.Contains(lower, "read by"):
			section = h.Read
		}
		if m := headerEntry.FindStringSubmatch(line); m != nil && section != nil {
			section[m[1]] = m[2]
		}
	}
	return h
}

// EnvUses returns the variables yaml substitutes (${env:NAME:-default}),
// each with its default ("" when it has none).
func EnvUses(yaml string) map[string]string {
	out := map[string]string{}
	for _, m := range envUse.FindAllStringSubmatch(yaml, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// CompareEnv reports each variable listed that is not used, each used that
// is not listed, and each whose listed default is not the one used.
func CompareEnv(doc, what string, listed, used map[string]string, compareDefaults bool) []Problem {
	var problems []Problem
	for _, name := range sortedKeys(listed) {
		def, ok := used[name]
		switch {
		case !ok:
			problems = append(problems, Problem{doc, fmt.Sprintf("header lists %s as %s, but nothing does", name, what)})
		case compareDefaults && def != listed[name]:
			problems = append(problems, Problem{doc, fmt.Sprintf("header says %s defaults to %q, the file's ${env:…} to %q", name, listed[name], def)})
		}
	}
	for _, name := range sortedKeys(used) {
		if _, ok := listed[name]; !ok {
			problems = append(problems, Problem{doc, fmt.Sprintf("%s is %s, but the header does not list it", name, what)})
		}
	}
	return problems
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ReadEnv returns the environment variables the Go code under root reads
// with os.Getenv or os.LookupEnv (a literal, or a constant of the same
// package), each with where, skipping test files and the folders skip
// names (relative to root, with their subfolders). A call whose name it
// cannot tell is a problem: the check must not pass by not looking.
func ReadEnv(root string, skip func(rel string) bool) (map[string][]string, []Problem, error) {
	read := map[string][]string{}
	var problems []Problem
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || skip(filepath.ToSlash(rel))) {
			return filepath.SkipDir
		}
		fset := token.NewFileSet()
		files, err := parseDir(fset, path)
		if err != nil {
			return err
		}
		consts := packageConsts(files)
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 1 || !isOSEnvCall(call) {
					return true
				}
				where := fset.Position(call.Pos())
				where.Filename, _ = filepath.Rel(root, where.Filename)
				name, ok := stringValue(call.Args[0], consts)
				if !ok {
					problems = append(problems, Problem{where.String(), "reads an environment variable whose name is not a literal or a constant of its package"})
					return true
				}
				read[name] = append(read[name], where.String())
				return true
			})
		}
		return nil
	})
	return read, problems, err
}

// parseDir parses the non-test Go files of one folder.
func parseDir(fset *token.FileSet, dir string) ([]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// packageConsts returns the string constants declared at package level.
func packageConsts(files []*ast.File) map[string]string {
	out := map[string]string{}
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if v, ok := stringValue(vs.Values[i], nil); ok {
							out[name.Name] = v
						}
					}
				}
			}
		}
	}
	return out
}

func isOSEnvCall(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "os" && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv")
}

func stringValue(e ast.Expr, consts map[string]string) (string, bool) {
	switch v := e.(type) {
	case *ast.BasicLit:
		if v.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(v.Value)
		return s, err == nil
	case *ast.Ident:
		s, ok := consts[v.Name]
		return s, ok
	}
	return "", false
}
