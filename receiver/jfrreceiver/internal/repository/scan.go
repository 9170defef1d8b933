package repository

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jfrstream"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"
)

// candidate is a repository folder found by a scan: the folder inside its
// root (opened by add, for a follower), and the name the collector gives it
// (the followers' key, and messages).
type candidate struct {
	inside     string
	dir        string
	info       os.FileInfo
	jvm        jvmevent.JVM
	discovered bool
	tenant     tenant // whom its chunk memory counts against
	alive      func() bool
}

// scanState is what one scan has found so far.
type scanState struct {
	found map[string]bool
	infos []os.FileInfo // folders found so far, to spot one reached by two paths
}

// scan finds repositories not yet followed.
func (s *Source) scan() error {
	st := &scanState{found: map[string]bool{}}
	var errs []error
	if s.scanner != nil {
		if err := s.scanDiscovered(st); err != nil {
			errs = append(errs, err)
		}
	}
	for _, pattern := range s.cfg.Include {
		if err := s.scanPattern(st, pattern); err != nil {
			errs = append(errs, err)
		}
	}
	// Forget ended repositories once they are gone, so the map stays small.
	for dir := range s.ended {
		if !st.found[dir] {
			delete(s.ended, dir)
			delete(s.endedTicks, dir)
		}
	}
	return errors.Join(errs...)
}

// scanDiscovered finds the repositories of the JVMs running in the proc
// root, each inside the JVM's own root. Every JVM's root is looked at in a
// goroutine of its own (lookAt), all at once, and waited for until one
// deadline, pollTimeout: a JVM whose /tmp hangs (a stalled FUSE or NFS
// mount in its container) is counted stalled and skipped, the others are
// followed, and its look is taken at the scan after it returns. A JVM
// whose look has not returned is not considered for attaching either.
func (s *Source) scanDiscovered(st *scanState) error {
	var errs []error
	jvms, refused, err := s.scanner.Scan()
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range refused {
		errs = append(errs, r.Err)
	}
	known := make(map[string]bool, len(s.followers)+len(s.ended))
	for dir := range s.followers {
		known[dir] = true
	}
	for dir := range s.ended {
		known[dir] = true
	}
	w := s.watch()
	alive := map[jvmKey]bool{}
	for _, j := range jvms {
		k := jvmKey{j.PID, j.StartTicks}
		alive[k] = true
		if s.looks[k] == nil {
			s.looks[k] = isolate(func() look { return s.lookAt(j, known, w) }, look.release)
		}
	}
	deadline := time.NewTimer(pollTimeout)
	defer deadline.Stop()
	expired := false
	for _, j := range jvms {
		k := jvmKey{j.PID, j.StartTicks}
		l, ok, first, fired := s.looks[k].await(deadline.C, expired)
		expired = fired
		if first {
			s.count(RefusedStalled)
			errs = append(errs, fmt.Errorf("repository: pid %d: looking for its repository folders in its root has not returned after %v; the JVM is skipped until it does, the others are read", j.PID, pollTimeout))
		}
		if !ok {
			continue
		}
		delete(s.looks, k)
		if err := s.addLooked(st, j, k, l); err != nil {
			errs = append(errs, err)
		}
		if s.starter != nil {
			if err := s.starter.consider(j, l.count > 0); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for k, c := range s.looks {
		if !alive[k] {
			c.abandon()
			delete(s.looks, k)
		}
	}
	for k := range s.tooMany {
		if !alive[k] {
			delete(s.tooMany, k)
		}
	}
	if s.starter != nil {
		s.starter.forget(alive)
	}
	return errors.Join(errs...)
}

// look is what a look at one discovered JVM's root found: its repository
// folders, those not followed yet each opened for a follower (a root of
// its own) and watched.
type look struct {
	count int // folders found, before maxRepositoriesPerJVM
	repos []lookedRepository
}

// lookedRepository is one repository folder a look found.
type lookedRepository struct {
	inside string
	dir    string
	info   os.FileInfo
	root   *procroot.Root // nil when the folder was followed already
	early  *early         // nil without a watch
}

// release closes what a look opened; the source takes what it follows
// first (add).
func (l look) release() {
	for _, r := range l.repos {
		if r.early != nil {
			r.early.unwatch()
		}
		if r.root != nil {
			r.root.Close()
		}
	}
}

// lookAt finds the repository folders of j inside its root; every call on
// the JVM's files is made here, in the look's own goroutine. Folders in
// known (followed or ended when the scan began) are only named.
func (s *Source) lookAt(j discovery.JVM, known map[string]bool, w *watcher) look {
	root, err := j.OpenRoot()
	if err != nil {
		return look{} // exited, or not ours to read: nothing to follow
	}
	defer root.Close()
	repos := j.Repositories(root)
	l := look{count: len(repos)}
	if len(repos) > maxRepositoriesPerJVM {
		repos = repos[len(repos)-maxRepositoriesPerJVM:]
	}
	for _, inside := range repos {
		info, err := root.Stat(inside)
		if err != nil || !info.IsDir() {
			continue
		}
		r := lookedRepository{inside: inside, dir: root.Display(inside), info: info}
		if !known[r.dir] {
			if r.root, err = j.OpenRoot(); err != nil {
				continue
			}
			if w != nil {
				if r.early, err = w.watch(r.root, inside, r.dir); err != nil {
					s.cfg.Logger.Debug("cannot watch JFR repository; chunk files are found by polling only", zap.String("repository", r.dir), zap.Error(err))
				}
			}
		}
		l.repos = append(l.repos, r)
	}
	return l
}

// addLooked follows the repository folders a look at j found.
func (s *Source) addLooked(st *scanState, j discovery.JVM, k jvmKey, l look) error {
	var err error
	if l.count > maxRepositoriesPerJVM && !s.tooMany[k] {
		s.tooMany[k] = true
		s.count(RefusedTooMany)
		err = fmt.Errorf("repository: pid %d has %d repository folders; following the newest %d", j.PID, l.count, maxRepositoriesPerJVM)
	}
	scanner, pid, start := s.scanner, j.PID, j.StartTicks
	for _, r := range l.repos {
		c := candidate{inside: r.inside, dir: r.dir, info: r.info, discovered: true,
			jvm:   jvmevent.JVM{PID: pid, StartTicks: start, Source: r.dir},
			alive: func() bool { return scanner.Alive(pid, start) }}
		s.add(st, c, opened{root: r.root, early: r.early})
	}
	return err
}

// scanPattern finds the repository folders a configured pattern matches;
// each is its own root, so nothing inside it leads out of it.
func (s *Source) scanPattern(st *scanState, pattern string) error {
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return fmt.Errorf("repository: pattern %q: %w", pattern, err)
	}
	for _, dir := range matches {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		d := dir
		// The pid in the name is the JVM's own; it is the collector's
		// only when both share a pid namespace, so it is reported but not
		// used to tell whether the JVM runs: the folder is.
		c := candidate{inside: "/", dir: dir, info: fi,
			jvm: jvmevent.JVM{PID: discovery.RepositoryPID(dir), Source: dir},
			alive: func() bool {
				_, err := os.Stat(d)
				return err == nil
			}}
		if f := s.add(st, c, opened{open: func() (*procroot.Root, error) { return procroot.OpenDir(d) }}); f != nil && f.staleAfter == 0 {
			f.staleAfter = staleAfter
		}
	}
	return nil
}

// opened is how add gets a follower's root: opened and watched already
// (root, early; add owns them and closes what it does not follow), or by
// open, on the source's goroutine (a pattern's folder, the operator's).
// root nil and open nil: the folder was followed when it was looked at,
// and is not followed anew until a later look.
type opened struct {
	root  *procroot.Root
	early *early
	open  func() (*procroot.Root, error)
}

// release closes what add did not take.
func (o opened) release() {
	look{repos: []lookedRepository{{root: o.root, early: o.early}}}.release()
}

// add follows c unless it is followed (or ended) already or is a folder
// found before by another path; o gives the follower its own root. It
// returns the follower, nil when there is none.
func (s *Source) add(st *scanState, c candidate, o opened) *follower {
	if st.found[c.dir] {
		o.release()
		return nil
	}
	// A pattern may reach a discovered JVM's repository by another path
	// (/tmp/… rather than /proc/<pid>/root/tmp/…): follow it once, as the
	// discovered JVM, whose resource is richer.
	if slices.ContainsFunc(st.infos, func(o os.FileInfo) bool { return os.SameFile(o, c.info) }) {
		o.release()
		return nil
	}
	st.found[c.dir] = true
	st.infos = append(st.infos, c.info)
	if f := s.followers[c.dir]; f != nil || s.ended[c.dir] || s.endedBefore(c) {
		o.release()
		return f
	}
	root, e := o.root, o.early
	if root == nil {
		if o.open == nil {
			return nil
		}
		var err error
		if root, err = o.open(); err != nil {
			s.cfg.Logger.Debug("cannot open the root of a JFR repository", zap.String("repository", c.dir), zap.Error(err))
			return nil
		}
		if w := s.watch(); w != nil {
			if e, err = w.watch(root, c.inside, c.dir); err != nil {
				s.cfg.Logger.Debug("cannot watch JFR repository; chunk files are found by polling only", zap.String("repository", c.dir), zap.Error(err))
			}
		}
	}
	s.cfg.Logger.Debug("following JFR repository", zap.String("repository", c.dir), zap.Int("pid", c.jvm.PID))
	f := &follower{src: s,
		followed: followed{root: root, inside: c.inside, dir: c.dir, jvm: c.jvm, discovered: c.discovered, alive: c.alive},
		reading:  reading{newest: !s.started, stream: jfrstream.New()}}
	f.tenant = tenant{dir: c.dir}
	if c.discovered {
		f.tenant = tenant{pid: c.jvm.PID, start: c.jvm.StartTicks}
	}
	if pos, ok := s.cfg.Resume[c.dir]; ok {
		delete(s.cfg.Resume, c.dir) // once: a folder found again later is new
		if pos.StartTicks == c.jvm.StartTicks {
			f.resume(pos)
		}
	}
	f.watcher = s.watcher
	f.early = e
	f.folder = c.info
	if f.early != nil {
		f.folder = f.early.info
	}
	s.followers[c.dir] = f
	return f
}
