package jfrreceiver

import "github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver/internal/jvmevent"

// xlogSources returns the -Xlog file source when configured.
func (r *jfrReceiver) xlogSources() []jvmevent.Source { return nil }
