package jfrreceiver

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/otel/attribute"
	otelmetric "go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/checkpoint"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/repository"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/xlog"
)

// checkpointInterval bounds how often one source's checkpoint is written
// while it reads on; shutdown writes the last one whatever the interval.
const checkpointInterval = time.Second

// Storage keys of the sources' checkpoints (the recordings' keys begin
// with "jfr.recording:").
const (
	keyXLog         = "jfr.xlog"
	keyRepositories = "jfr.repositories"
)

// repositoriesCheckpoint is what the repositories' key holds.
type repositoriesCheckpoint struct {
	Repositories map[string]repository.Position `json:"repositories"`
}

// checkpoints are the receiver's checkpoint stores and what they held at
// start.
type checkpoints struct {
	client      storage.Client // the storage key's client, nil without one
	xlog        *checkpoint.Store
	xlogResume  map[string]xlog.Position
	repos       *checkpoint.Store
	reposResume map[string]repository.Position
}

// xlogCheckpoint is what the -Xlog source's key holds.
type xlogCheckpoint struct {
	Files map[string]xlog.Position `json:"files"`
}

// openCheckpoints opens the storage key's client and reads the saved
// positions; without one it says what a restart repeats or misses.
func (r *jfrReceiver) openCheckpoints(ctx context.Context, host component.Host) error {
	r.ck = checkpoints{}
	a := r.cfg.Repositories.Attach
	xlogOn := len(r.cfg.XLog.Include) > 0 || r.cfg.XLog.Discover || (r.cfg.Repositories.Enabled && a.Enabled && a.SafepointLog)
	id := r.cfg.Storage
	if id == nil {
		var lost []string
		if xlogOn {
			lost = append(lost, "-Xlog files are tailed from their end again (what was written while the collector was down is missed)")
		}
		if r.cfg.Repositories.Enabled {
			lost = append(lost, "the newest chunk of every live JFR repository is read again from its start (its windows are sent twice)")
		}
		if len(r.cfg.Recordings.Include) > 0 && r.cfg.Recordings.Storage == nil {
			lost = append(lost, "finished recordings are read again")
		}
		if len(lost) > 0 {
			r.set.Logger.Warn("no storage extension (storage): progress is kept in memory only, so after a restart "+joinAnd(lost),
				zap.Strings("lost_on_restart", lost))
		}
		return nil
	}
	client, err := storageClient(ctx, host, *id, r.set.ID, "storage", "checkpoints")
	if err != nil {
		return err
	}
	r.ck.client = client
	if r.storage == nil && len(r.cfg.Recordings.Include) > 0 {
		r.storage = client // one client: the recordings' keys are their own
	}
	if r.cfg.Repositories.Enabled {
		r.ck.repos = checkpoint.New(client, keyRepositories, checkpointInterval, func() { r.countCheckpoint("repository") })
		var saved repositoriesCheckpoint
		ok, err := r.ck.repos.Load(ctx, &saved)
		if err != nil {
			r.set.Logger.Warn("the repositories' checkpoint is unreadable: repositories are read as without one", zap.Error(err))
		}
		if ok {
			r.ck.reposResume = saved.Repositories
		}
	}
	if xlogOn {
		r.ck.xlog = checkpoint.New(client, keyXLog, checkpointInterval, func() { r.countCheckpoint("xlog") })
		var saved xlogCheckpoint
		ok, err := r.ck.xlog.Load(ctx, &saved)
		if err != nil {
			// A bad checkpoint costs what a missing one does.
			r.set.Logger.Warn("the -Xlog checkpoint is unreadable: files are read as without one", zap.Error(err))
		}
		if ok {
			r.ck.xlogResume = saved.Files
		}
	}
	return nil
}

// saveCheckpoints writes each source's progress, at most once per
// checkpointInterval unless force.
func (r *jfrReceiver) saveCheckpoints(ctx context.Context, force bool) {
	if r.ck.repos != nil && r.repos != nil {
		if err := r.ck.repos.Save(ctx, repositoriesCheckpoint{Repositories: r.repos.Positions()}, force); err != nil {
			r.set.Logger.Warn("writing the repositories' checkpoint", zap.Error(err))
		}
	}
	if r.ck.xlog != nil && r.xlogs != nil {
		if err := r.ck.xlog.Save(ctx, xlogCheckpoint{Files: r.xlogs.Positions()}, force); err != nil {
			r.set.Logger.Warn("writing the -Xlog checkpoint", zap.Error(err))
		}
	}
}

func (r *jfrReceiver) countCheckpoint(source string) {
	r.telemetry.ReceiverJfrCheckpointWrites.Add(context.Background(), 1,
		otelmetric.WithAttributeSet(attribute.NewSet(attribute.String("source", source))))
}

// closeStorage closes the clients, a shared one once.
func (r *jfrReceiver) closeStorage(ctx context.Context) {
	clients := []storage.Client{r.ck.client}
	if r.storage != r.ck.client {
		clients = append(clients, r.storage)
	}
	for _, c := range clients {
		if c == nil {
			continue
		}
		if err := c.Close(ctx); err != nil {
			r.set.Logger.Warn("closing the storage client", zap.Error(err))
		}
	}
}

func joinAnd(parts []string) string {
	switch len(parts) {
	case 1:
		return parts[0]
	case 2:
		return parts[0] + " and " + parts[1]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + ", and " + parts[len(parts)-1]
}
