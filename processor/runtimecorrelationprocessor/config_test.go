package runtimecorrelationprocessor

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-ai/otelcol-ai/internal/cfgtest"
	"github.com/otelcol-ai/otelcol-ai/internal/window"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		id      component.ID
		want    *Config
		wantErr []string
	}{
		{id: component.NewID(metadata.Type), want: createDefaultConfig().(*Config)},
		{
			id: component.NewIDWithName(metadata.Type, "custom"),
			want: &Config{
				MatchScope: ScopePod,
				OverlapPairs: [][]window.Kind{
					{window.KindJVMGCPause, window.KindPythonGILWait},
					{window.KindPythonGCPause, window.KindJVMSafepoint},
				},
				Windows:  WindowsConfig{Retention: 30 * time.Second, MaxWindows: 5000, MaxPerScope: 1000, MaxClockSkew: time.Second},
				Spans:    SpansConfig{Delay: 1500 * time.Millisecond, MaxWaiting: 2000, Events: true, ChildSpans: true, MaxPlacements: 8},
				Metrics:  MetricsConfig{Interval: 30 * time.Second, MetricsConfig: metadata.DefaultMetricsConfig()},
				Identity: IdentityConfig{ProcRoot: "/host/proc", CacheTTL: 500 * time.Millisecond, MaxProcesses: 100},
				Timeline: TimelineConfig{MaxSpans: 500, MaxBytes: 1 << 20},
			},
		},
		{id: component.NewIDWithName(metadata.Type, "bad_scope"), wantErr: []string{`match_scope: "thread" is not one of process, pod, host`}},
		{
			id: component.NewIDWithName(metadata.Type, "bad_pairs"),
			wantErr: []string{
				"overlap_pairs[0]: want two kinds [first, second], got 1",
				`overlap_pairs[1]: "python.gil.hold" is not a window kind`,
				"overlap_pairs[2]: pairs one kind with itself (python.gil.wait)",
				"overlap_pairs[4]: python.gil.wait and jvm.gc.pause are already paired by overlap_pairs[3]",
			},
		},
		{
			id: component.NewIDWithName(metadata.Type, "bad_bounds"),
			wantErr: []string{
				"windows::retention: 1s must exceed spans::delay (2s)",
				"windows::max_windows: must be positive, got 0",
				"windows::max_per_scope: must be positive, got -1",
				"windows::max_clock_skew: must not be negative, got -1s",
				"spans::max_waiting: must be positive, got -5",
				"spans::max_placements: must not be negative, got -1",
				"metrics::interval: must be positive, got 0s",
				"identity::proc_root: must not be empty",
				"identity::cache_ttl: must not be negative, got -1s",
				"identity::max_processes: must be positive, got 0",
				"timeline::max_spans: must be positive, got 0",
				"timeline::max_bytes: must be at least 65536 (one span with a clipped name and scores), got 1000",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := cfgtest.Load(t, tt.id, NewFactory().CreateDefaultConfig())
			err := confmap.Validate(cfg)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("confmap.Validate: %v", err)
				}
				if !reflect.DeepEqual(cfg, tt.want) {
					t.Errorf("cfg: got %v, want %v", cfg, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("err: got nil error, want an error")
			}
			for _, want := range tt.wantErr {
				if got := err.Error(); !strings.Contains(got, want) {
					t.Errorf("error: got %q, want it to contain %q", got, want)
				}
			}
			if got := strings.Count(err.Error(), "\n") + 1; got != len(tt.wantErr) {
				t.Errorf("errors: %v: got %v, want %v", err, got, len(tt.wantErr))
			}
		})
	}
}

func TestDefaultPairsEveryJVMKindWithEveryPythonKind(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	table := cfg.pairTable()
	n := 0
	for a, ka := range kinds {
		for b, kb := range kinds {
			want := strings.HasPrefix(string(ka), "jvm.") && strings.HasPrefix(string(kb), "python.")
			if table[a][b] != want {
				t.Errorf("pair [%s, %s] = %v, want %v", ka, kb, table[a][b], want)
			}
			if table[a][b] {
				n++
			}
		}
	}
	if n != 6 {
		t.Errorf("%d default pairs, want 6", n)
	}
}
