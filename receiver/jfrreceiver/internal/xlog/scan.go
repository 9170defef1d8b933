package xlog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/fsdeadline"
	"github.com/otelcol-ai/otelcol-ai/internal/procresource"
	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// resumeSet holds the positions an earlier run saved, each taken by the
// first follow of its path (from a scan's goroutine).
type resumeSet struct {
	mu        sync.Mutex
	positions map[string]Position
}

// take returns the saved position of path, once.
func (r *resumeSet) take(path string) (Position, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pos, ok := r.positions[path]
	if ok {
		delete(r.positions, path)
	}
	return pos, ok
}

// scanKey names a scan: a pattern's (by index in Config.Include) or a
// discovered JVM's.
type scanKey struct {
	pattern int // 1 + the pattern's index; 0 for a JVM
	jvm     rootKey
	added   bool // the JVM's added outputs (Config.Added), not its own
}

// scanCall is a scan running in its own goroutine, in root (held for it;
// nil when the scan opens the JVM's root itself).
type scanCall struct {
	call    *fsdeadline.Call[scanResult]
	root    *heldRoot
	jvm     *discovery.JVM
	pod     string
	stalled bool
}

// scanResult is what a scan found: tails opened, ready to follow.
type scanResult struct {
	root     *procroot.Root // the JVM's root, when the scan opened it
	gone     bool           // the JVM exited before its root was opened
	jfr      bool           // the JVM records JFR: its logs are not read
	tails    []*tail
	refused  []string // paths refused (not regular files), to report once
	errs     []error
	refusals []string
	over     bool // a bound left files out
}

// discard closes what the scan opened.
func (r *scanResult) discard() {
	for _, t := range r.tails {
		t.close()
	}
	if r.root != nil {
		r.root.Close()
	}
}

// owner is whose bounds a tail counts against.
type owner struct {
	pattern int // 1 + the pattern's index; 0 for a JVM's file
	jvm     rootKey
	pod     string // "" outside a pod, or unknown
}

func (o owner) String() string {
	if o.pattern > 0 {
		return fmt.Sprintf("pattern %d", o.pattern-1)
	}
	return fmt.Sprintf("jvm %d/%d", o.jvm.pid, o.jvm.start)
}

// room returns how many more files o may follow, and the owner whose
// bound limits it (o, or its pod).
func (s *Source) room(o owner) (int, string) {
	mine, pod := 0, 0
	for _, t := range s.files {
		if t.owner.pattern == o.pattern && t.owner.jvm == o.jvm {
			mine++
		}
		if o.pod != "" && t.owner.pod == o.pod {
			pod++
		}
	}
	bound := maxTailsPerJVM
	if o.pattern > 0 {
		bound = maxMatches
	}
	room, who := bound-mine, o.String()
	if o.pod != "" && maxTailsPerPod-pod < room {
		room, who = maxTailsPerPod-pod, "pod "+o.pod
	}
	return max(room, 0), who
}

// scan starts a scan of every pattern and every discovered JVM not being
// scanned already, each in its own goroutine, and follows the files of
// those that return before deadline (or have returned since an earlier
// poll left them running).
func (s *Source) scan(ctx, deadline context.Context) error {
	var errs []error
	seen := map[scanKey]bool{}
	fromStart := s.started || s.cfg.FromStart // a file that appears after the first scan is new: read it all
	if len(s.cfg.Include) > 0 && s.roots[rootKey{}] == nil {
		root, err := hostRoot()
		if err != nil {
			return fmt.Errorf("xlog: %w", err)
		}
		s.adopt(rootKey{}, root)
		defer s.release(s.roots[rootKey{}])
	}
	for i, pattern := range s.cfg.Include {
		key := scanKey{pattern: i + 1}
		seen[key] = true
		if s.scans[key] != nil {
			continue
		}
		abs, err := filepath.Abs(pattern)
		if err != nil {
			errs = append(errs, fmt.Errorf("xlog: pattern %q: %w", pattern, err))
			continue
		}
		o := owner{pattern: i + 1}
		s.startScan(key, s.hold(rootKey{}), nil, o, func(root *procroot.Root, room int, followed func(string) bool, prev map[string]bool) scanResult {
			var r scanResult
			matches, over, err := glob(root, abs)
			if err != nil {
				r.errs = append(r.errs, fmt.Errorf("xlog: pattern %q: %w", pattern, err))
			}
			r.over = over
			s.openMatches(&r, root, matches, nil, room, followed, prev, fromStart)
			return r
		})
	}
	if s.cfg.Scanner != nil {
		jvms, refusals, err := s.cfg.Scanner.Scan()
		if err != nil {
			errs = append(errs, fmt.Errorf("xlog: %w", err))
		}
		for _, r := range refusals {
			errs = append(errs, fmt.Errorf("xlog: %w", r.Err))
		}
		for _, j := range jvms {
			key := scanKey{jvm: rootKey{j.PID, j.StartTicks}}
			if len(j.XLogFiles) == 0 {
				continue
			}
			seen[key] = true
			if s.scans[key] != nil {
				continue
			}
			s.startJVMScan(key, j, fromStart)
		}
	}
	if s.cfg.Added != nil {
		for _, a := range s.cfg.Added() {
			key := scanKey{jvm: rootKey{a.JVM.PID, a.JVM.StartTicks}, added: true}
			seen[key] = true
			if s.scans[key] == nil {
				s.startAddedScan(key, a)
			}
		}
	}
	keys := make([]scanKey, 0, len(s.scans))
	for k := range s.scans {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b scanKey) int { // patterns in order, then JVMs by pid
		rank := func(k scanKey) int { return cmp.Or(k.pattern, len(s.cfg.Include)+1) }
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a.jvm.pid, b.jvm.pid), cmpBool(a.added, b.added))
	})
	for _, k := range keys {
		if ctx.Err() != nil {
			break
		}
		c := s.scans[k]
		wait := deadline
		if c.stalled {
			wait = expired
		}
		res, ok := c.call.Wait(wait)
		if !ok {
			if !c.stalled && errors.Is(deadline.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
				c.stalled = true
				s.cfg.Refused(RefusedStalled)
				errs = append(errs, fmt.Errorf("xlog: the scan of %s has not returned after %v; it is skipped until it does, the other files are read", s.scanName(k), pollTimeout))
			}
			continue
		}
		delete(s.scans, k)
		errs = append(errs, s.follow(k, c, res, seen[k])...)
	}
	for k := range s.refused {
		if !seen[k] && s.scans[k] == nil {
			delete(s.refused, k)
			delete(s.over, k)
		}
	}
	for k := range s.pods {
		own, added := scanKey{jvm: k}, scanKey{jvm: k, added: true}
		if !seen[own] && s.scans[own] == nil && !seen[added] && s.scans[added] == nil {
			delete(s.pods, k)
		}
	}
	return errors.Join(errs...)
}

// scanName names a scan in messages.
func (s *Source) scanName(k scanKey) string {
	if k.pattern > 0 {
		return fmt.Sprintf("pattern %q", s.cfg.Include[k.pattern-1])
	}
	if k.added {
		return fmt.Sprintf("the safepoint log of pid %d", k.jvm.pid)
	}
	return fmt.Sprintf("the -Xlog files of pid %d", k.jvm.pid)
}

// scanWork is a scan's filesystem work, run in its own goroutine: root is
// where it matches (held for it), room how many files it may open,
// followed says which are followed already, prev which were refused at the
// last scan (read-only).
type scanWork func(root *procroot.Root, room int, followed func(string) bool, prev map[string]bool) scanResult

// startScan starts work for key in root (nil: a JVM's, opened by the work).
func (s *Source) startScan(key scanKey, root *heldRoot, jvm *discovery.JVM, o owner, work scanWork) {
	room, _ := s.room(o)
	followed := map[string]bool{}
	for p, t := range s.files {
		if t.owner.pattern == o.pattern && t.owner.jvm == o.jvm {
			followed[p] = true
		}
	}
	prev := s.refused[key]
	c := &scanCall{root: root, jvm: jvm, pod: o.pod}
	var r *procroot.Root
	if root != nil {
		r = root.Root
	}
	c.call = fsdeadline.Start(func() scanResult {
		return work(r, room, func(p string) bool { return followed[p] }, prev)
	})
	s.scans[key] = c
}

// startJVMScan starts the scan of a discovered JVM's -Xlog files.
func (s *Source) startJVMScan(key scanKey, j discovery.JVM, fromStart bool) {
	o := owner{jvm: key.jvm, pod: s.podOf(key.jvm, j)}
	jvm := j
	s.startScan(key, s.hold(key.jvm), &jvm, o, func(root *procroot.Root, room int, followed func(string) bool, prev map[string]bool) scanResult {
		var r scanResult
		if root == nil {
			opened, err := j.OpenRoot()
			if err != nil {
				r.gone = true // exited since it was listed
				return r
			}
			root, r.root = opened, opened
		}
		if j.StartsRecording || len(j.Repositories(root)) > 0 {
			r.jfr = true
			return r
		}
		patterns := j.XLogFiles
		if len(patterns) > maxTailsPerJVM {
			patterns, r.over = patterns[:maxTailsPerJVM], true
		}
		id := func(name string) *jvmevent.JVM {
			return &jvmevent.JVM{PID: j.PID, StartTicks: j.StartTicks, Source: root.Display(name)}
		}
		for _, pattern := range patterns {
			matches, over, _ := glob(root, pattern)
			r.over = r.over || over
			s.openMatches(&r, root, matches, id, room, followed, prev, fromStart)
		}
		return r
	})
}

// podOf returns the pod of a discovered JVM ("" outside one, or unknown),
// read once.
func (s *Source) podOf(k rootKey, j discovery.JVM) string {
	pod, ok := s.pods[k]
	if !ok {
		if s.ids == nil {
			s.ids = procresource.NewReader(j.ProcRoot, 0)
		}
		if id, err := s.ids.Identity(j.PID); err == nil && id.StartTicks == j.StartTicks {
			pod = id.PodUID
		}
		s.pods[k] = pod
	}
	return pod
}

// startAddedScan starts the scan of an output added to a JVM: the one file,
// from its start (the JVM created it when the output was added; a later
// collector resumes from its saved position), counted against the JVM's
// bounds like its own logs.
func (s *Source) startAddedScan(key scanKey, a Added) {
	j := a.JVM
	o := owner{jvm: key.jvm, pod: s.podOf(key.jvm, j)}
	s.startScan(key, s.hold(key.jvm), &j, o, func(root *procroot.Root, room int, followed func(string) bool, prev map[string]bool) scanResult {
		var r scanResult
		if root == nil {
			opened, err := j.OpenRoot()
			if err != nil {
				r.gone = true
				return r
			}
			root, r.root = opened, opened
		}
		id := func(name string) *jvmevent.JVM {
			return &jvmevent.JVM{PID: j.PID, StartTicks: j.StartTicks, Source: root.Display(name)}
		}
		s.openMatches(&r, root, []string{a.Name}, id, room, followed, prev, true)
		for _, t := range r.tails {
			t.added = true
		}
		return r
	})
}

// openMatches opens the matched files not followed yet, the last names
// first, at most room of them (r.over when more were left).
func (s *Source) openMatches(r *scanResult, root *procroot.Root, matches []string, id func(string) *jvmevent.JVM, room int, followed func(string) bool, prev map[string]bool, fromStart bool) {
	for _, name := range slices.Backward(matches) {
		p := root.Display(name)
		if followed(p) {
			continue
		}
		if len(r.tails) >= room {
			r.over = true
			return
		}
		t := &tail{name: name, path: p, refusedNow: prev[p]}
		if id != nil {
			t.jvm = id(name)
		}
		err := t.follow(root, s.resume.take, fromStart, s.cfg.Logger)
		r.refusals, t.refusals = append(r.refusals, t.refusals...), nil
		if errors.Is(err, procroot.ErrNotRegular) {
			r.refused = append(r.refused, p)
			if !prev[p] {
				r.errs = append(r.errs, err)
			}
			continue
		}
		if err != nil {
			r.errs = append(r.errs, err)
			continue
		}
		if t.file != nil {
			r.tails = append(r.tails, t)
		}
	}
}

// follow takes a scan's result: its files are followed, within the bounds
// of their owner (checked again: other scans may have added files). current
// says the scan's pattern or JVM is still there.
func (s *Source) follow(k scanKey, c *scanCall, res scanResult, current bool) []error {
	errs := res.errs
	for _, r := range res.refusals {
		s.cfg.Refused(r)
	}
	refused := make(map[string]bool, len(res.refused))
	for _, p := range res.refused {
		refused[p] = true
	}
	s.refused[k] = refused
	if res.gone || !current {
		res.discard()
		if c.root != nil {
			s.release(c.root)
		}
		return errs
	}
	root := c.root
	if res.root != nil {
		root = s.adopt(k.jvm, res.root)
	}
	defer s.release(root)
	if res.jfr {
		// JFR tells more, and the repository source reads it: stop
		// tailing a log begun before the recording (started by attach,
		// say), so no pause is reported twice.
		for _, t := range s.files {
			if t.owner.pattern == 0 && t.owner.jvm == k.jvm && !t.added {
				t.gone = true
			}
		}
		return errs
	}
	o := owner{pattern: k.pattern, jvm: k.jvm, pod: c.pod}
	over, who := res.over, o.String()
	for _, t := range res.tails {
		room, limit := s.room(o)
		if s.files[t.path] != nil || room == 0 {
			if room == 0 {
				over, who = true, limit
			}
			t.close()
			continue
		}
		t.held, t.owner = root, o
		if t.jvm != nil {
			t.alive = s.aliveFunc(c.jvm, k.jvm)
		}
		root.holds.Add(1)
		s.files[t.path] = t
		s.cfg.Logger.Debug("tailing -Xlog file", zap.String("file", t.path))
		s.startRead(t)
	}
	if over && !s.over[k] {
		if room, limit := s.room(o); room == 0 {
			who = limit
		}
		s.cfg.Refused(RefusedTooMany)
		errs = append(errs, fmt.Errorf("xlog: %s: more -Xlog files than the bounds allow (%d per pattern, %d per JVM, %d per pod; %s is at its bound); the rest are not followed", s.scanName(k), maxMatches, maxTailsPerJVM, maxTailsPerPod, who))
	}
	s.over[k] = over
	return errs
}

// aliveFunc returns whether the discovered JVM k still runs, for its tails.
func (s *Source) aliveFunc(j *discovery.JVM, k rootKey) func() bool {
	if s.cfg.Scanner != nil {
		scanner := s.cfg.Scanner
		return func() bool { return scanner.Alive(k.pid, k.start) }
	}
	if s.ids == nil && j != nil {
		s.ids = procresource.NewReader(j.ProcRoot, 0)
	}
	ids := s.ids
	return func() bool { return ids == nil || discovery.Alive(ids, k.pid, k.start) }
}

// glob returns the names inside root that match pattern, as procroot's
// Glob does, bounded: at most maxListed entries of any folder are read and
// the last maxMatches names of each step are kept; over says some were
// left out.
func glob(root *procroot.Root, pattern string) (matches []string, over bool, err error) {
	if _, err := filepath.Match(pattern, ""); err != nil {
		return nil, false, err
	}
	matches = []string{"/"}
	for _, part := range strings.Split(strings.TrimPrefix(filepath.Clean("/"+pattern), "/"), "/") {
		if part == "" {
			continue
		}
		var next []string
		for _, dir := range matches {
			if !strings.ContainsAny(part, `*?[\`) {
				p := filepath.Join(dir, part)
				if _, err := root.Stat(p); err == nil {
					next = append(next, p)
				}
				continue
			}
			names, more := list(root, dir)
			over = over || more
			for _, n := range names {
				if ok, _ := filepath.Match(part, n); ok {
					next = append(next, filepath.Join(dir, n))
				}
			}
		}
		slices.Sort(next)
		if len(next) > maxMatches {
			next, over = next[len(next)-maxMatches:], true
		}
		matches = next
	}
	return matches, over, nil
}

// list returns at most maxListed names in the folder dir inside root, and
// whether there were more.
func list(root *procroot.Root, dir string) ([]string, bool) {
	d, err := root.OpenDirectory(dir)
	if err != nil {
		return nil, false
	}
	defer d.Close()
	names, _ := d.Readdirnames(maxListed + 1)
	if len(names) > maxListed {
		return names[:maxListed], true
	}
	return names, false
}
