package repository

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/attach"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/discovery"
)

// Settings is the project's JFR configuration (.jfc): the events the
// receiver reads, at low overhead.
//
//go:embed otelcol-ai.jfc
var Settings []byte

// RecordingName names the recordings the receiver starts.
const RecordingName = "otelcol-ai"

// maxAttachTries bounds how often a JVM that does not (yet) take JFR.start
// is tried, one try per discovery.
const maxAttachTries = 5

// maxSettings caps the configured .jfc read (the project's is 3 KiB);
// maxLoggedOutput what is logged of a JVM's answer to JFR.start (a line).
const (
	maxSettings     = 1 << 20
	maxLoggedOutput = 4 << 10
)

// AttachConfig turns on starting recordings in JVMs that run none.
type AttachConfig struct {
	// Enabled starts a recording (JFR.start through the attach protocol)
	// in every discovered JVM without a repository.
	Enabled bool
	// Settings is the .jfc to record with, as a path the collector can
	// read; "" uses the project's (Settings).
	Settings string
	// Timeout bounds one attach exchange.
	Timeout time.Duration
}

type jvmKey struct {
	pid   int
	start uint64
}

// starter starts and stops recordings. Its maps are bounded by the JVMs
// running: entries of exited JVMs are dropped at each discovery.
type starter struct {
	cfg     AttachConfig
	procs   string
	logger  *zap.Logger
	tries   map[jvmKey]int
	started map[jvmKey]discovery.JVM
	// only, when set, limits attaching to the JVMs it accepts (tests: never
	// attach to JVMs the test did not start).
	only func(discovery.JVM) bool
}

func newStarter(cfg AttachConfig, procRoot string, logger *zap.Logger) *starter {
	return &starter{cfg: cfg, procs: procRoot, logger: logger, tries: map[jvmKey]int{}, started: map[jvmKey]discovery.JVM{}}
}

// consider starts a recording in j unless it has one, was started by us,
// or was tried too often. It returns an error only for a failure worth
// reporting (once per JVM).
func (s *starter) consider(j discovery.JVM, hasRepository bool) error {
	k := jvmKey{j.PID, j.StartTicks}
	if hasRepository || s.started[k].PID != 0 || s.tries[k] >= maxAttachTries || (s.only != nil && !s.only(j)) {
		return nil
	}
	t := attach.Target{ProcRoot: s.procs, PID: j.PID, NSPID: j.NSPID, StartTicks: j.StartTicks, Timeout: s.cfg.Timeout}
	if !t.Ready() {
		return nil
	}
	s.tries[k]++
	settings, cleanup, err := s.settingsFor(j)
	if err != nil {
		s.tries[k] = maxAttachTries
		return err
	}
	defer cleanup()
	cmd := fmt.Sprintf("JFR.start name=%s settings=%s disk=true maxage=10m", RecordingName, settings)
	out, err := t.Jcmd(cmd)
	if attach.NotYet(err) {
		return nil // JFR not registered yet; try at the next discovery
	}
	if err != nil {
		s.tries[k] = maxAttachTries
		return fmt.Errorf("repository: starting a recording in pid %d: %w", j.PID, err)
	}
	s.started[k] = j
	// The answer comes from the JVM's socket, the container's to write:
	// what is logged of it is bounded.
	s.logger.Info("started a JFR recording", zap.Int("pid", j.PID), zap.String("output", out[:min(len(out), maxLoggedOutput)]))
	return nil
}

// settingsFor puts the settings file where the JVM can read it (its own
// /tmp, which may be a container's: written inside its root, never through
// a link) and returns the path as the JVM sees it, and a cleanup that
// removes it.
func (s *starter) settingsFor(j discovery.JVM) (string, func(), error) {
	data := Settings
	if s.cfg.Settings != "" {
		var err error
		if data, err = readSettings(s.cfg.Settings); err != nil {
			return "", func() {}, err
		}
	}
	root, err := j.OpenRoot()
	if err != nil {
		return "", func() {}, fmt.Errorf("repository: writing settings for pid %d: %w", j.PID, err)
	}
	name := "/tmp/otelcol-ai-" + strconv.Itoa(j.NSPID) + ".jfc"
	if err := writeNew(root, name, data); err != nil {
		root.Close()
		return "", func() {}, fmt.Errorf("repository: writing settings for pid %d: %w", j.PID, err)
	}
	return name, func() {
		_ = root.Remove(name)
		root.Close()
	}, nil
}

// writeNew writes data to the new file name inside root. A file of that
// name is a leftover of ours or planted: it is removed (a link itself, not
// what it names) and the file created exclusively, so nothing is written
// through a link.
func writeNew(root *procroot.Root, name string, data []byte) error {
	if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := root.Create(name, 0o644, -1, -1)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = root.Remove(name)
	}
	return err
}

// readSettings reads the operator's .jfc: a regular file, opened without
// blocking, at most maxSettings bytes.
func readSettings(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("repository: attach settings: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("repository: attach settings: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("repository: attach settings %s: %w", path, procroot.ErrNotRegular)
	}
	data, err := procroot.ReadCapped(f, maxSettings)
	if err != nil {
		return nil, fmt.Errorf("repository: attach settings %s: %w", path, err)
	}
	return data, nil
}

// forget drops JVMs that are no longer running.
func (s *starter) forget(alive map[jvmKey]bool) {
	for k := range s.tries {
		if !alive[k] {
			delete(s.tries, k)
		}
	}
	for k := range s.started {
		if !alive[k] {
			delete(s.started, k)
		}
	}
}

// stopAll stops the recordings this receiver started in JVMs still running.
func (s *starter) stopAll(finder *discovery.Finder) {
	for k, j := range s.started {
		delete(s.started, k)
		if !finder.Alive(j.PID, j.StartTicks) {
			continue
		}
		t := attach.Target{ProcRoot: s.procs, PID: j.PID, NSPID: j.NSPID, StartTicks: j.StartTicks, Timeout: s.cfg.Timeout}
		if _, err := t.Jcmd("JFR.stop name=" + RecordingName); err != nil {
			s.logger.Warn("stopping the JFR recording this receiver started", zap.Int("pid", j.PID), zap.Error(err))
		}
	}
}
