package onnxinferenceextension // import "github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension"

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	ort "github.com/yalue/onnxruntime_go"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/metadata"
	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/ortenv"
	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/repository"
	"github.com/otelcol-ai/otelcol-ai/internal/ortlib"
	"github.com/otelcol-ai/otelcol-ai/internal/recoverable"
	"github.com/otelcol-ai/otelcol-ai/pkg/modelrunner"
)

// onnxExtension serves the models of one repository.
type onnxExtension struct {
	cfg    *Config
	logger *zap.Logger
	tel    *metadata.TelemetryBuilder

	// reload serialises scans (Start's and the poller's).
	reload sync.Mutex

	mu      sync.RWMutex
	started bool
	repo    *repository.Repository
	opts    *ort.SessionOptions
	models  map[string]*model
	checks  map[string]map[int]func(modelrunner.Signature) error
	nextID  int
	// status reports each failed load, and StatusOK at the next
	// successful one.
	status   recoverable.Status
	cancel   context.CancelFunc
	pollDone chan struct{}
}

// model holds the versions of one model being served.
type model struct {
	name string
	mu   sync.RWMutex
	// served maps version number to loaded version.
	served map[int64]*version
	// attrs labels the model's metrics, made once.
	attrs metric.MeasurementOption
	// failed remembers versions whose file failed to load (a new version,
	// or new content of a served one), by file fingerprint, so that an
	// unchanged bad file is not retried (and counted) each poll.
	failed map[int64]repository.Fingerprint
}

var (
	_ extension.Extension  = (*onnxExtension)(nil)
	_ modelrunner.Provider = (*onnxExtension)(nil)
)

func newExtension(set extension.Settings, cfg *Config) (*onnxExtension, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("onnxinference: telemetry: %w", err)
	}
	return &onnxExtension{cfg: cfg, logger: set.Logger, tel: tel}, nil
}

// Start loads ONNX Runtime and the repository's models and starts polling.
// A model named in the config that has no loadable version fails Start.
func (e *onnxExtension) Start(_ context.Context, host component.Host) error {
	path, source, err := ortlib.Locate(e.cfg.LibraryPath)
	if err != nil {
		return fmt.Errorf("onnxinference: library_path: %w", err)
	}
	root, err := repository.Locate(e.cfg.Repository)
	if err != nil {
		return fmt.Errorf("onnxinference: repository: %w", err)
	}
	repo, err := repository.Open(root, e.cfg.MaxModelBytes, e.cfg.SettleTime)
	if err != nil {
		return fmt.Errorf("onnxinference: repository: %w", err)
	}
	if err := ortenv.Acquire(path); err != nil {
		return fmt.Errorf("onnxinference: %w", err)
	}
	opts, err := e.sessionOptions()
	if err != nil {
		_ = ortenv.Release()
		return fmt.Errorf("onnxinference: session: %w", err)
	}
	if err := e.tel.RegisterOnnxinferenceModelVersionCallback(e.observeVersions); err != nil {
		_ = opts.Destroy()
		_ = ortenv.Release()
		return fmt.Errorf("onnxinference: telemetry: %w", err)
	}
	e.logger.Info("ONNX Runtime loaded", zap.String("library", path), zap.String("from", string(source)),
		zap.String("version", ortenv.Version()), zap.String("repository", root))

	e.mu.Lock()
	e.started, e.repo, e.opts = true, repo, opts
	e.status.Attach(host)
	e.models = map[string]*model{}
	if e.checks == nil {
		e.checks = map[string]map[int]func(modelrunner.Signature) error{}
	}
	e.mu.Unlock()

	e.scan()
	if e.waitingToSettle() {
		// A model whose only versions were written moments ago (an init
		// container copying the repository, say) is loaded at start, not
		// one poll later: wait for its files to settle, once.
		time.Sleep(e.cfg.SettleTime)
		e.scan()
	}
	var errs []error
	for name := range e.cfg.Models {
		if len(e.servedVersions(name)) == 0 {
			errs = append(errs, fmt.Errorf("onnxinference: models::%s: no loadable version in %s", name, root))
		}
	}
	if err := errors.Join(errs...); err != nil {
		_ = e.Shutdown(context.Background())
		return err
	}
	if e.cfg.PollInterval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		e.cancel, e.pollDone = cancel, make(chan struct{})
		go e.poll(ctx, e.pollDone)
	}
	return nil
}

// Shutdown stops polling, drains and destroys every session and releases
// ONNX Runtime. It is safe without Start and safe twice.
func (e *onnxExtension) Shutdown(context.Context) error {
	if e.cancel != nil {
		e.cancel()
		<-e.pollDone
		e.cancel, e.pollDone = nil, nil
	}
	e.mu.Lock()
	started := e.started
	models := e.models
	opts := e.opts
	e.started, e.models, e.opts, e.repo = false, nil, nil, nil
	e.status.Attach(nil)
	e.mu.Unlock()
	if !started {
		return nil
	}
	for _, m := range models {
		m.mu.Lock()
		served := m.served
		m.served = nil
		m.mu.Unlock()
		for _, v := range served {
			v.inflight.Wait()
			v.destroy()
		}
	}
	if opts != nil {
		_ = opts.Destroy()
	}
	e.tel.Shutdown()
	return ortenv.Release()
}

func (e *onnxExtension) sessionOptions() (*ort.SessionOptions, error) {
	s := e.cfg.Session
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, err
	}
	fail := func(field string, err error) (*ort.SessionOptions, error) {
		_ = opts.Destroy()
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if s.IntraOpThreads > 0 {
		if err := opts.SetIntraOpNumThreads(s.IntraOpThreads); err != nil {
			return fail("intra_op_threads", err)
		}
	}
	if s.InterOpThreads > 0 {
		if err := opts.SetInterOpNumThreads(s.InterOpThreads); err != nil {
			return fail("inter_op_threads", err)
		}
	}
	level := map[string]ort.GraphOptimizationLevel{
		"disabled": ort.GraphOptimizationLevelDisableAll,
		"basic":    ort.GraphOptimizationLevelEnableBasic,
		"extended": ort.GraphOptimizationLevelEnableExtended,
		"all":      ort.GraphOptimizationLevelEnableAll,
	}[s.GraphOptimizationLevel]
	if err := opts.SetGraphOptimizationLevel(level); err != nil {
		return fail("graph_optimization_level", err)
	}
	if s.ExecutionProvider == ProviderCUDA {
		if err := appendCUDA(opts, s.DeviceID); err != nil {
			e.logger.Warn("CUDA execution provider unavailable: running models on the CPU",
				zap.Int("device_id", s.DeviceID), zap.Error(err))
		}
	}
	return opts, nil
}

func appendCUDA(opts *ort.SessionOptions, device int) error {
	cuda, err := ort.NewCUDAProviderOptions()
	if err != nil {
		return err
	}
	defer func() { _ = cuda.Destroy() }()
	if err := cuda.Update(map[string]string{"device_id": fmt.Sprint(device)}); err != nil {
		return err
	}
	return opts.AppendExecutionProviderCUDA(cuda)
}

func (e *onnxExtension) poll(ctx context.Context, done chan struct{}) {
	defer close(done)
	ticker := time.NewTicker(e.cfg.PollInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			e.scan()
		}
	}
}

// waitingToSettle reports whether some model serves nothing yet but has a
// version whose file is still settling.
func (e *onnxExtension) waitingToSettle() bool {
	e.mu.RLock()
	repo, models := e.repo, make([]*model, 0, len(e.models))
	for _, m := range e.models {
		models = append(models, m)
	}
	e.mu.RUnlock()
	for _, m := range models {
		if len(m.versions()) > 0 {
			continue
		}
		candidates, _ := repo.Versions(m.name)
		for _, c := range candidates {
			if errors.Is(c.Err, repository.ErrUnsettled) {
				return true
			}
		}
	}
	return false
}

// scan brings the served versions in line with the repository: loads what
// the policies want and is not served, unloads what they no longer want.
func (e *onnxExtension) scan() {
	e.reload.Lock()
	defer e.reload.Unlock()
	e.mu.RLock()
	repo := e.repo
	e.mu.RUnlock()
	if repo == nil {
		return
	}
	var names []string
	if len(e.cfg.Models) > 0 {
		for name := range e.cfg.Models {
			names = append(names, name)
		}
		slices.Sort(names)
	} else {
		var err error
		if names, err = repo.Models(); err != nil {
			e.reportFailure("", 0, err, false)
			return
		}
	}
	e.mu.Lock()
	for name := range e.models {
		if !slices.Contains(names, name) {
			// The model's directory is gone: unload it after draining.
			m := e.models[name]
			delete(e.models, name)
			defer e.unloadAll(m)
		}
	}
	var found []*model
	for _, name := range names {
		if e.models[name] == nil {
			m := &model{name: name, served: map[int64]*version{}, failed: map[int64]repository.Fingerprint{},
				attrs: modelAttrs(name)}
			e.models[name] = m
			found = append(found, m)
		}
	}
	e.mu.Unlock()
	// A model's counters exist from the moment it is found, at 0: a
	// dashboard or an alert then tells "none" from "not collected".
	for _, m := range found {
		e.tel.OnnxinferenceModelLoadFailures.Add(context.Background(), 0, m.attrs)
		e.tel.OnnxinferenceModelReloads.Add(context.Background(), 0, m.attrs)
	}
	for _, name := range names {
		e.reconcile(repo, name)
	}
}

// modelAttrs labels a model's metrics.
func modelAttrs(name string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("model", name)))
}

// reconcile brings one model's served versions in line with its policy and
// its files: it loads the wanted versions not served, unloads the served
// ones no longer wanted, and reloads those whose file changed in place.
func (e *onnxExtension) reconcile(repo *repository.Repository, name string) {
	e.mu.RLock()
	m := e.models[name]
	e.mu.RUnlock()
	if m == nil {
		return
	}
	policy, err := e.policy(repo, name)
	if err != nil {
		e.reportFailure(name, 0, err, false)
	}
	candidates, err := repo.Versions(name)
	if err != nil {
		e.reportFailure(name, 0, err, false)
		candidates = nil
	}
	eligible, present := m.eligible(candidates)
	eligible = e.loadWanted(repo, m, policy, candidates, eligible)
	e.unloadUnwanted(m, policy, eligible, present)
	e.reloadChanged(repo, m, candidates)
}

// eligible returns the versions the policy may choose from: those served,
// whatever their file is doing now (a change in place is handled by
// reloadChanged, and never unloads them), and those on disk that are
// complete and have not failed with the same file. A newer version that
// failed therefore leaves the older one serving. present holds every
// version on disk; failures of versions no longer there are forgotten.
func (m *model) eligible(candidates []repository.Candidate) (eligible []int64, present map[int64]bool) {
	present = map[int64]bool{}
	for _, c := range candidates {
		present[c.Version] = true
		switch {
		case m.isServed(c.Version):
		case errors.Is(c.Err, repository.ErrUnsettled):
			continue
		case m.failedWith(c):
			continue
		}
		eligible = append(eligible, c.Version)
	}
	for v := range m.failed {
		if !present[v] {
			delete(m.failed, v)
		}
	}
	return eligible, present
}

// loadWanted loads the eligible versions the policy wants that are not
// served, and returns eligible without those that failed. After a failure
// the policy is asked again from the first candidate: its choice may now
// reach an older version. Each failure shrinks eligible, so this ends.
func (e *onnxExtension) loadWanted(repo *repository.Repository, m *model, policy repository.Policy, candidates []repository.Candidate, eligible []int64) []int64 {
	for {
		failed, ok := e.loadFirstWanted(repo, m, policy, candidates, eligible)
		if ok {
			return eligible
		}
		eligible = slices.DeleteFunc(eligible, func(v int64) bool { return v == failed })
	}
}

// loadFirstWanted loads, in candidate order, the wanted versions not served
// until one fails; it returns that version, or ok when none failed.
func (e *onnxExtension) loadFirstWanted(repo *repository.Repository, m *model, policy repository.Policy, candidates []repository.Candidate, eligible []int64) (failed int64, ok bool) {
	for _, c := range candidates {
		if !slices.Contains(eligible, c.Version) || m.isServed(c.Version) || !policy.Wants(c.Version, eligible) {
			continue
		}
		if err := e.load(repo, m, c, nil); err != nil {
			if !errors.Is(err, repository.ErrUnsettled) {
				// A file that changed while being read is still being
				// written: no failure, it is taken once it settles.
				m.failed[c.Version] = c.Fingerprint()
				e.reportFailure(m.name, c.Version, err, false)
			}
			return c.Version, false
		}
	}
	return 0, true
}

// unloadUnwanted unloads what the policy no longer wants, once something it
// wants is serving (or the version directory is gone), after the runs in
// flight on it finish.
func (e *onnxExtension) unloadUnwanted(m *model, policy repository.Policy, eligible []int64, present map[int64]bool) {
	m.mu.Lock()
	var drop []*version
	for num, v := range m.served {
		if !present[num] || !policy.Wants(num, eligible) {
			delete(m.served, num)
			drop = append(drop, v)
		}
	}
	m.mu.Unlock()
	for _, v := range drop {
		e.logger.Info("model version unloaded", zap.String("model", m.name), zap.Int64("version", v.sig.Version))
		v.inflight.Wait()
		v.destroy()
	}
}

// reloadChanged reloads a served version whose file changed in place
// (written again, or another file renamed over it) as a new version is
// loaded: once the file has settled, read, validated, warmed up and
// checked, then swapped in. Until then, and if the new content fails, the
// previous content keeps serving.
func (e *onnxExtension) reloadChanged(repo *repository.Repository, m *model, candidates []repository.Candidate) {
	for _, c := range candidates {
		old := m.get(c.Version)
		if old == nil || errors.Is(c.Err, repository.ErrUnsettled) {
			continue
		}
		if c.Fingerprint() == old.file {
			m.forgetFailure(e, c.Version) // put back as it was
			continue
		}
		if m.failedWith(c) {
			continue
		}
		if err := e.load(repo, m, c, old); err != nil && !errors.Is(err, repository.ErrUnsettled) {
			m.failed[c.Version] = c.Fingerprint()
			e.reportFailure(m.name, c.Version, err, true)
		}
	}
}

// load reads c's file and loads it: parsed, warmed up with one run, passed
// by every registered check, then served. With old, the version served now
// under c's number, the new content replaces old's (unless it is the same
// bytes), and old is destroyed once the runs in flight on it finish.
func (e *onnxExtension) load(repo *repository.Repository, m *model, c repository.Candidate, old *version) error {
	start := time.Now()
	data, err := repo.Read(c)
	if err != nil {
		return err
	}
	digest := sha256.Sum256(data)
	if old != nil && digest == old.digest {
		// Written again with the same bytes (touched, copied over):
		// nothing to reload.
		old.file = c.Fingerprint()
		m.forgetFailure(e, c.Version)
		e.logger.Debug("model file rewritten with the same content: not reloaded",
			zap.String("model", m.name), zap.Int64("version", c.Version))
		return nil
	}
	e.mu.RLock()
	opts := e.opts
	e.mu.RUnlock()
	v, err := loadVersion(m.name, c.Version, data, opts)
	if err != nil {
		return err
	}
	if err := e.runChecks(v.sig); err != nil {
		v.destroy()
		return err
	}
	v.file, v.digest = c.Fingerprint(), digest
	m.mu.Lock()
	m.served[c.Version] = v
	m.mu.Unlock()
	delete(m.failed, c.Version)
	took := time.Since(start)
	e.status.Succeeded()
	e.tel.OnnxinferenceModelLoadDuration.Record(context.Background(), took.Seconds(), m.attrs)
	fields := []zap.Field{zap.String("model", m.name), zap.Int64("version", c.Version),
		zap.Stringers("inputs", stringers(v.sig.Inputs)), zap.Stringers("outputs", stringers(v.sig.Outputs)),
		zap.Duration("took", took)}
	if old == nil {
		e.logger.Info("model version loaded", fields...)
		return nil
	}
	// New runs take the new content from now on; those in flight on the
	// old one finish on it first.
	old.inflight.Wait()
	old.destroy()
	e.tel.OnnxinferenceModelReloads.Add(context.Background(), 1, m.attrs)
	e.logger.Info("model version reloaded: its file changed", fields...)
	return nil
}

func stringers(infos []modelrunner.ValueInfo) []fmt.Stringer {
	out := make([]fmt.Stringer, len(infos))
	for i := range infos {
		out[i] = infos[i]
	}
	return out
}

func (e *onnxExtension) unloadAll(m *model) {
	m.mu.Lock()
	served := m.served
	m.served = map[int64]*version{}
	m.mu.Unlock()
	for _, v := range served {
		e.logger.Info("model unloaded: its directory is gone", zap.String("model", m.name), zap.Int64("version", v.sig.Version))
		v.inflight.Wait()
		v.destroy()
	}
}

// policy returns the model's version policy: the extension's config, else the
// model's config.yaml, else the newest version.
func (e *onnxExtension) policy(repo *repository.Repository, name string) (repository.Policy, error) {
	if mc, ok := e.cfg.Models[name]; ok {
		return mc.VersionPolicy, nil
	}
	data, err := repo.ReadConfig(name)
	if err != nil || data == nil {
		return repository.Policy{}, err
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return repository.Policy{}, fmt.Errorf("%s: %w", repository.ConfigFileName, err)
	}
	var mc ModelConfig
	if err := confmap.NewFromStringMap(raw).Unmarshal(&mc); err != nil {
		return repository.Policy{}, fmt.Errorf("%s: %w", repository.ConfigFileName, err)
	}
	if err := mc.VersionPolicy.Validate(); err != nil {
		return repository.Policy{}, fmt.Errorf("%s: version_policy: %w", repository.ConfigFileName, err)
	}
	return mc.VersionPolicy, nil
}

// reportFailure logs, counts and reports as a recoverable status a failure
// to load a model version (version 0: the model as a whole); inPlace: the
// new content of a served version's file, whose previous content keeps
// serving.
func (e *onnxExtension) reportFailure(name string, version int64, err error, inPlace bool) {
	msg := "model version failed to load; the previous version keeps serving"
	if inPlace {
		err = fmt.Errorf("onnxinference: model %q version %d: file changed in place: %w", name, version, err)
		msg = "model version's file changed in place and failed to load; the version's previous content keeps serving"
	} else {
		err = fmt.Errorf("onnxinference: model %q version %d: %w", name, version, err)
	}
	e.logger.Error(msg, zap.String("model", name), zap.Int64("version", version), zap.Error(err))
	e.tel.OnnxinferenceModelLoadFailures.Add(context.Background(), 1, modelAttrs(name))
	e.status.Failed(err)
}

func (e *onnxExtension) observeVersions(_ context.Context, o metric.Int64Observer) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, m := range e.models {
		if vs := m.versions(); len(vs) > 0 {
			o.Observe(vs[0], m.attrs)
		}
	}
	return nil
}

func (m *model) isServed(v int64) bool {
	return m.get(v) != nil
}

// get returns the served version numbered v, or nil.
func (m *model) get(v int64) *version {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.served[v]
}

// failedWith reports whether c's file, unchanged, already failed to load.
func (m *model) failedWith(c repository.Candidate) bool {
	fp, ok := m.failed[c.Version]
	return ok && fp == c.Fingerprint()
}

// forgetFailure drops the failure remembered for version v, whose file
// holds what it serves again, and then reports the extension healthy again,
// as a successful load does.
func (m *model) forgetFailure(e *onnxExtension, v int64) {
	if _, ok := m.failed[v]; ok {
		delete(m.failed, v)
		e.status.Succeeded()
	}
}

// versions returns the served version numbers, newest first.
func (m *model) versions() []int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]int64, 0, len(m.served))
	for v := range m.served {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b int64) int { return int(b - a) })
	return out
}

func (e *onnxExtension) servedVersions(name string) []int64 {
	e.mu.RLock()
	m := e.models[name]
	e.mu.RUnlock()
	if m == nil {
		return nil
	}
	return m.versions()
}

// acquire returns the version to run, with a run registered on it so that it
// is not destroyed before release.
func (e *onnxExtension) acquire(name string, number int64) (*version, metric.MeasurementOption, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if !e.started {
		return nil, nil, modelrunner.ErrClosed
	}
	m := e.models[name]
	if m == nil {
		return nil, nil, fmt.Errorf("model %q: %w", name, modelrunner.ErrUnknownModel)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var v *version
	if number == 0 {
		for num, cand := range m.served {
			if v == nil || num > v.sig.Version {
				v = cand
			}
		}
		if v == nil {
			return nil, nil, fmt.Errorf("model %q: %w (no version loaded)", name, modelrunner.ErrUnknownModel)
		}
	} else if v = m.served[number]; v == nil {
		return nil, nil, fmt.Errorf("model %q version %d: %w", name, number, modelrunner.ErrUnknownVersion)
	}
	v.inflight.Add(1)
	return v, m.attrs, nil
}

// Signature implements modelrunner.Provider.
func (e *onnxExtension) Signature(name string, number int64) (modelrunner.Signature, error) {
	v, _, err := e.acquire(name, number)
	if err != nil {
		return modelrunner.Signature{}, err
	}
	defer v.inflight.Done()
	return v.sig, nil
}

// Run implements modelrunner.Provider.
func (e *onnxExtension) Run(ctx context.Context, name string, req modelrunner.Request) (modelrunner.Result, error) {
	v, attrs, err := e.acquire(name, req.Version)
	if err != nil {
		return modelrunner.Result{}, err
	}
	defer v.inflight.Done()
	opts := v.metricOptions(attrs)
	e.tel.OnnxinferenceRunsInFlight.Add(ctx, 1, opts.add...)
	defer e.tel.OnnxinferenceRunsInFlight.Add(ctx, -1, opts.add...)
	start := time.Now()
	outputs, err := v.run(req.Inputs, req.Outputs)
	if err != nil {
		return modelrunner.Result{Model: name, Version: v.sig.Version}, err
	}
	e.tel.OnnxinferenceRunDuration.Record(ctx, time.Since(start).Seconds(), opts.record...)
	if len(req.Inputs) > 0 && len(req.Inputs[0].Shape) > 0 {
		e.tel.OnnxinferenceRunBatchSize.Record(ctx, req.Inputs[0].Shape[0], opts.record...)
	}
	return modelrunner.Result{Model: name, Version: v.sig.Version, Outputs: outputs}, nil
}

// Watch implements modelrunner.Provider.
func (e *onnxExtension) Watch(name string, check func(modelrunner.Signature) error) (func(), error) {
	e.mu.Lock()
	if e.checks == nil {
		e.checks = map[string]map[int]func(modelrunner.Signature) error{}
	}
	if e.checks[name] == nil {
		e.checks[name] = map[int]func(modelrunner.Signature) error{}
	}
	id := e.nextID
	e.nextID++
	e.checks[name][id] = check
	e.mu.Unlock()
	unregister := func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.checks[name], id)
	}
	sig, err := e.Signature(name, 0)
	if err == nil {
		err = check(sig)
	}
	if err != nil {
		unregister()
		return func() {}, err
	}
	return unregister, nil
}

func (e *onnxExtension) runChecks(sig modelrunner.Signature) error {
	e.mu.RLock()
	checks := make([]func(modelrunner.Signature) error, 0, len(e.checks[sig.Model]))
	for _, c := range e.checks[sig.Model] {
		checks = append(checks, c)
	}
	e.mu.RUnlock()
	var errs []error
	for _, c := range checks {
		if err := c(sig); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("refused by a component that runs it: %w", err)
	}
	return nil
}
