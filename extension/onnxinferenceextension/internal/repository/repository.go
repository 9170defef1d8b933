// Package repository reads a model repository in Triton's layout,
//
//	<root>/<model>/<version>/model.onnx
//	<root>/<model>/config.yaml          (optional, per model)
//
// where a version is a positive decimal number. It decides which files are
// candidates to load; it never loads them. Names that could escape the root
// ("..", separators, hidden names) are refused, links are followed only when
// they stay inside the root, and a file still being written (modified within
// the settle time) is left for a later scan.
package repository // import "github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/repository"

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ModelFileName is the file each version directory holds.
const ModelFileName = "model.onnx"

// ConfigFileName is the optional per-model configuration file.
const ConfigFileName = "config.yaml"

// Errors a scan or a read reports, wrapped with the path concerned.
var (
	ErrBadName     = errors.New("name not allowed in a model repository")
	ErrOutsideRoot = errors.New("path resolves outside the model repository")
	ErrTooLarge    = errors.New("model file exceeds the size limit")
	ErrNotRegular  = errors.New("not a regular file")
	ErrUnsettled   = errors.New("model file is still changing")
)

// CheckName returns an error unless name is usable as one path element
// inside the repository: not empty, not "." or "..", no separator, not
// hidden, no NUL.
func CheckName(name string) error {
	switch {
	case name == "", name == ".", name == "..":
	case strings.ContainsAny(name, `/\`+"\x00"):
	case strings.HasPrefix(name, "."):
	default:
		return nil
	}
	return fmt.Errorf("%w: %q", ErrBadName, name)
}

// Repository is a model repository on disk.
type Repository struct {
	root     string // as configured, for messages
	resolved string // with links resolved, for containment checks
	maxBytes int64
	settle   time.Duration
	now      func() time.Time
}

// Open checks that root is a directory and returns its Repository. maxBytes
// bounds a model file's size (0: no bound); settle is how long a file must
// have been unmodified before it is a candidate.
func Open(root string, maxBytes int64, settle time.Duration) (*Repository, error) {
	resolved, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("repository %s: %w", root, err)
	}
	resolved, err = filepath.Abs(resolved)
	if err != nil {
		return nil, fmt.Errorf("repository %s: %w", root, err)
	}
	info, err := os.Stat(resolved)
	if err != nil {
		return nil, fmt.Errorf("repository %s: %w", root, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("repository %s: not a directory", root)
	}
	return &Repository{root: root, resolved: resolved, maxBytes: maxBytes, settle: settle, now: time.Now}, nil
}

// Root returns the repository's path as configured.
func (r *Repository) Root() string { return r.root }

// Models lists the model directories in the repository, sorted. Entries
// whose names are not allowed are skipped.
func (r *Repository) Models() ([]string, error) {
	entries, err := os.ReadDir(r.resolved)
	if err != nil {
		return nil, fmt.Errorf("repository %s: %w", r.root, err)
	}
	var names []string
	for _, e := range entries {
		if CheckName(e.Name()) != nil {
			continue
		}
		if _, err := r.inside(filepath.Join(r.resolved, e.Name())); err != nil {
			continue
		}
		if info, err := os.Stat(filepath.Join(r.resolved, e.Name())); err == nil && info.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Candidate is one version directory of a model whose file may be loaded.
type Candidate struct {
	Model   string
	Version int64
	// Path is the model file, links resolved.
	Path    string
	Size    int64
	ModTime time.Time
	// Dev and Ino identify the file (zero where the platform has no
	// inodes): a file renamed into place is a new file.
	Dev, Ino uint64
	// Err is set when the version exists but must not be loaded (outside
	// the root, too large, not a regular file, still changing); the caller
	// reports it as a failed load of that version, or waits for ErrUnsettled.
	Err error
}

// Fingerprint identifies one content of a model file without reading it:
// a file written again, or another file renamed into its place, has another
// fingerprint.
type Fingerprint struct {
	Size     int64
	ModTime  int64 // Unix nanoseconds
	Dev, Ino uint64
}

// Fingerprint returns the fingerprint of the file as Versions saw it.
func (c Candidate) Fingerprint() Fingerprint {
	var mod int64
	if !c.ModTime.IsZero() {
		mod = c.ModTime.UnixNano()
	}
	return Fingerprint{Size: c.Size, ModTime: mod, Dev: c.Dev, Ino: c.Ino}
}

// Versions lists the numbered version directories of model, newest first.
// A directory that exists but cannot be used is listed with Err set.
func (r *Repository) Versions(model string) ([]Candidate, error) {
	if err := CheckName(model); err != nil {
		return nil, err
	}
	dir, err := r.inside(filepath.Join(r.resolved, model))
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", model, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", model, err)
	}
	var out []Candidate
	for _, e := range entries {
		v, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil || v <= 0 || strconv.FormatInt(v, 10) != e.Name() {
			continue // not a version directory: Triton ignores these too
		}
		out = append(out, r.candidate(model, v, filepath.Join(dir, e.Name(), ModelFileName)))
	}
	slices.SortFunc(out, func(a, b Candidate) int { return int(b.Version - a.Version) })
	return out, nil
}

func (r *Repository) candidate(model string, version int64, path string) Candidate {
	c := Candidate{Model: model, Version: version, Path: path}
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		// A version directory without its file yet: not a version.
		c.Err = fmt.Errorf("%s: %w", path, ErrUnsettled)
		return c
	}
	resolved, err := r.inside(path)
	if err != nil {
		c.Err = err
		return c
	}
	c.Path = resolved
	info, err := os.Stat(resolved)
	if err != nil {
		c.Err = fmt.Errorf("%s: %w", path, err)
		return c
	}
	c.Size, c.ModTime = info.Size(), info.ModTime()
	c.Dev, c.Ino = fileID(info)
	switch {
	case !info.Mode().IsRegular():
		c.Err = fmt.Errorf("%s: %w", path, ErrNotRegular)
	case r.maxBytes > 0 && info.Size() > r.maxBytes:
		c.Err = fmt.Errorf("%s: %w: %d bytes, limit %d", path, ErrTooLarge, info.Size(), r.maxBytes)
	case r.now().Sub(info.ModTime()) < r.settle:
		c.Err = fmt.Errorf("%s: %w: modified %s ago, settle time %s", path, ErrUnsettled,
			r.now().Sub(info.ModTime()).Round(time.Millisecond), r.settle)
	}
	return c
}

// Read returns the candidate's file contents, provided the file is still the
// one Versions saw: same file (device and inode), size and modification time
// after the read, and no larger than the limit. Reading into memory means the session
// is built from exactly the bytes that were checked.
func (r *Repository) Read(c Candidate) ([]byte, error) {
	if c.Err != nil {
		return nil, c.Err
	}
	f, err := os.Open(c.Path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c.Path, err)
	}
	defer func() { _ = f.Close() }() // read-only: nothing to flush
	limit := r.maxBytes
	if limit <= 0 {
		limit = 1<<63 - 2
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c.Path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("read %s: %w: limit %d bytes", c.Path, ErrTooLarge, r.maxBytes)
	}
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c.Path, err)
	}
	if dev, ino := fileID(info); dev != c.Dev || ino != c.Ino {
		return nil, fmt.Errorf("read %s: %w: replaced by another file since it was listed", c.Path, ErrUnsettled)
	}
	if info.Size() != c.Size || !info.ModTime().Equal(c.ModTime) || int64(len(data)) != c.Size {
		return nil, fmt.Errorf("read %s: %w: changed while being read", c.Path, ErrUnsettled)
	}
	return data, nil
}

// ReadConfig returns the model's config.yaml, or nil when there is none.
func (r *Repository) ReadConfig(model string) ([]byte, error) {
	if err := CheckName(model); err != nil {
		return nil, err
	}
	path := filepath.Join(r.resolved, model, ConfigFileName)
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	resolved, err := r.inside(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(resolved)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", model, err)
	}
	return data, nil
}

// inside resolves links in path and returns the result when it lies within
// the repository, ErrOutsideRoot otherwise.
func (r *Repository) inside(path string) (string, error) {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	rel, err := filepath.Rel(r.resolved, resolved)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%s -> %s: %w", path, resolved, ErrOutsideRoot)
	}
	return resolved, nil
}

// Policy says which versions of a model are served, as Triton's version
// policy does. At most one field is set; none set means Latest: 1.
type Policy struct {
	// Latest serves the N highest versions.
	Latest int `mapstructure:"latest"`
	// All serves every version.
	All bool `mapstructure:"all"`
	// Specific serves exactly these versions.
	Specific []int64 `mapstructure:"specific"`
}

// Validate checks that at most one kind of policy is set and that its
// values make sense.
func (p Policy) Validate() error {
	set := 0
	if p.Latest != 0 {
		set++
	}
	if p.All {
		set++
	}
	if len(p.Specific) > 0 {
		set++
	}
	switch {
	case set > 1:
		return errors.New("set only one of latest, all, specific")
	case p.Latest < 0:
		return fmt.Errorf("latest must be positive, got %d", p.Latest)
	}
	for _, v := range p.Specific {
		if v <= 0 {
			return fmt.Errorf("specific versions must be positive, got %d", v)
		}
	}
	return nil
}

// Wants reports whether the policy serves version, given every available
// version of the model sorted newest first.
func (p Policy) Wants(version int64, available []int64) bool {
	switch {
	case p.All:
		return true
	case len(p.Specific) > 0:
		return slices.Contains(p.Specific, version)
	}
	n := p.Latest
	if n == 0 {
		n = 1
	}
	for i, v := range available {
		if i >= n {
			return false
		}
		if v == version {
			return true
		}
	}
	return false
}
