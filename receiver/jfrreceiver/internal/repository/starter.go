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
const RecordingName = attach.RecordingName

// maxSettings caps the configured .jfc read (the project's is 3 KiB).
const maxSettings = 1 << 20

// AttachConfig turns on starting recordings in JVMs that run none.
type AttachConfig struct {
	// Enabled starts a recording (JFR.start through the attach protocol)
	// in every discovered JVM without a repository, unless its owner opted
	// out.
	Enabled bool
	// Settings is the .jfc to record with, as a path the collector can
	// read; "" uses the project's (Settings).
	Settings string
	// Timeout bounds one attach exchange.
	Timeout time.Duration
	// SafepointLog adds a log of its safepoints to a JVM whose own
	// recordings leave short ones out (attach.RecorderConfig.SafepointLog).
	SafepointLog bool
	// Pods, when set, says which pods opted out (Kubernetes).
	Pods attach.PodPolicy
	// Only, when set (tests), limits attaching to the pids it accepts.
	Only func(pid int) bool
}

type jvmKey struct {
	pid   int
	start uint64
}

// starter holds the attach.Recorder that decides, starts and stops the
// recordings and keeps every discovered JVM's status.
type starter struct {
	cfg      AttachConfig
	procs    string
	recorder *attach.Recorder
	// only, when set, limits attaching to the JVMs it accepts (tests: never
	// attach to JVMs the test did not start).
	only func(discovery.JVM) bool
}

// newStarter returns a starter; stalled counts an attach exchange that
// hangs on the JVM's files.
func newStarter(cfg AttachConfig, procRoot string, logger *zap.Logger, stalled func()) *starter {
	s := &starter{cfg: cfg, procs: procRoot}
	s.recorder = attach.NewRecorder(attach.RecorderConfig{
		ProcRoot: procRoot, Enabled: cfg.Enabled, Timeout: cfg.Timeout, SafepointLog: cfg.SafepointLog, Pods: cfg.Pods, Logger: logger, Stalled: stalled,
		Settings: s.settingsFor,
	})
	return s
}

// consider hands j to the recorder, which starts a recording in it unless
// it has one or its owner opted out. It returns an error only for a failure
// worth reporting (once per JVM).
func (s *starter) consider(j discovery.JVM, hasRepository bool) error {
	if (s.only != nil && !s.only(j)) || (s.cfg.Only != nil && !s.cfg.Only(j.PID)) {
		return nil
	}
	return s.recorder.Consider(j, hasRepository)
}

// JVMStates returns how many discovered JVMs are in each attach.State
// (none before the first discovery, or without discovery).
func (s *Source) JVMStates() map[attach.State]int64 {
	if s.starter == nil {
		return nil
	}
	return s.starter.recorder.Counts()
}

// SafepointLogs returns the safepoint logs added to running JVMs (none
// without discovery).
func (s *Source) SafepointLogs() []attach.SafepointLog {
	if s.starter == nil {
		return nil
	}
	return s.starter.recorder.SafepointLogs()
}

// SafepointLogSince returns when the safepoint log added to a JVM began,
// false when it has none.
func (s *Source) SafepointLogSince(pid int, startTicks uint64) (int64, bool) {
	if s.starter == nil {
		return 0, false
	}
	return s.starter.recorder.SafepointLogSince(pid, startTicks)
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
	s.recorder.Forget(func(pid int, startTicks uint64) bool { return alive[jvmKey{pid, startTicks}] })
}

// stopAll stops the recordings this receiver started in JVMs still running
// with the start time they had.
func (s *starter) stopAll(*discovery.Scanner) { s.recorder.StopAll() }
