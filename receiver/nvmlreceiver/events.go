package nvmlreceiver

import (
	"context"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver/internal/metadata"
)

// eventWaitMillis bounds one nvmlEventSetWait, and so how long Shutdown waits
// for the event loop.
var eventWaitMillis uint32 = 1000

// eventErrorBackoff is the pause after an unexpected error from the event
// set, so a misbehaving driver does not spin a core.
var eventErrorBackoff = 5 * time.Second

// maxEventErrors ends the loop after this many unexpected errors in a row.
const maxEventErrors = 10

func (r *nvmlReceiver) eventsWanted() bool {
	e := r.cfg.Events
	return e.GpuXid.Enabled || e.GpuEcc.Enabled || e.GpuDeviceLost.Enabled
}

// wantedEventTypes is the NVML event mask for the enabled events.
func (r *nvmlReceiver) wantedEventTypes() uint64 {
	var mask uint64
	if r.cfg.Events.GpuXid.Enabled || r.cfg.Events.GpuDeviceLost.Enabled {
		mask |= nvml.EventTypeXidCriticalError
	}
	if r.cfg.Events.GpuEcc.Enabled {
		mask |= nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError
	}
	return mask
}

// watchEvents waits for XID and ECC events on every GPU that supports them
// and sends each as a log record. It owns the event set and frees it.
func (r *nvmlReceiver) watchEvents(ctx context.Context, s *session) {
	defer r.wg.Done()
	defer func() {
		if p := recover(); p != nil {
			r.logger.Error("NVML event monitoring stopped by a panic in the NVML binding", zap.Any("panic", p))
		}
	}()
	set, ret := s.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		r.logger.Warn("NVML event monitoring unavailable: nvmlEventSetCreate failed", zap.String("nvml_return", ret.Error()))
		return
	}
	defer func() {
		if ret := set.Free(); ret != nvml.SUCCESS {
			r.logger.Warn("nvmlEventSetFree failed", zap.String("nvml_return", ret.Error()))
		}
	}()

	want := r.wantedEventTypes()
	byUUID := map[string]*gpu{}
	registered := 0
	for _, g := range s.gpus {
		byUUID[g.uuid] = g
		supported, ret := g.handle.GetSupportedEventTypes()
		if ret != nvml.SUCCESS {
			continue
		}
		mask := supported & want
		if mask == 0 {
			continue
		}
		if ret := g.handle.RegisterEvents(mask, set); ret != nvml.SUCCESS {
			r.logger.Warn("GPU does not deliver events", zap.Int("index", g.index), zap.String("nvml_return", ret.Error()))
			continue
		}
		registered++
	}
	if registered == 0 {
		r.logger.Info("No GPU supports XID/ECC events; event monitoring is off")
		return
	}

	lb := metadata.NewLogsBuilder(metadata.LogsBuilderConfig{Events: r.cfg.Events, ResourceAttributes: r.cfg.ResourceAttributes}, r.set)
	errorsInRow := 0
	for ctx.Err() == nil {
		data, ret := set.Wait(eventWaitMillis)
		switch ret {
		case nvml.SUCCESS:
			errorsInRow = 0
			r.recordEvent(ctx, lb, byUUID, data)
		case nvml.ERROR_TIMEOUT:
			errorsInRow = 0
		case nvml.ERROR_GPU_IS_LOST:
			r.recordLost(ctx, lb, byUUID, data, ret)
			r.logger.Error("A GPU was lost; NVML event monitoring stops", zap.String("nvml_return", ret.Error()))
			return
		default:
			errorsInRow++
			if errorsInRow >= maxEventErrors {
				r.logger.Error("NVML event monitoring stops after repeated errors", zap.String("nvml_return", ret.Error()))
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(eventErrorBackoff):
			}
		}
	}
}

func (r *nvmlReceiver) eventGPU(byUUID map[string]*gpu, dev nvml.Device) *gpu {
	if dev == nil {
		return nil
	}
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		return nil
	}
	return byUUID[uuid]
}

func (r *nvmlReceiver) recordEvent(ctx context.Context, lb *metadata.LogsBuilder, byUUID map[string]*gpu, data nvml.EventData) {
	g := r.eventGPU(byUUID, data.Device)
	ts := pcommon.NewTimestampFromTime(time.Now())
	switch data.EventType {
	case nvml.EventTypeXidCriticalError:
		desc := xidDescription(data.EventData)
		lb.RecordGpuXidEvent(ctx, ts, int64(data.EventData), desc)
		fields := []zap.Field{zap.Uint64("xid", data.EventData), zap.String("meaning", desc)}
		if g != nil {
			fields = append(fields, zap.Int("index", g.index), zap.String("uuid", g.uuid))
		}
		r.logger.Warn("GPU XID error", fields...)
		if data.EventData == 79 {
			// "Fallen off the bus": the device will not answer again.
			if g != nil {
				g.lost.Store(true)
			}
			lb.RecordGpuDeviceLostEvent(ctx, ts, "XID 79")
		}
	case nvml.EventTypeSingleBitEccError:
		lb.RecordGpuEccEvent(ctx, ts, metadata.AttributeErrorTypeCorrected)
	case nvml.EventTypeDoubleBitEccError:
		lb.RecordGpuEccEvent(ctx, ts, metadata.AttributeErrorTypeUncorrected)
	default:
		return
	}
	r.emitEvents(ctx, lb, g)
}

func (r *nvmlReceiver) recordLost(ctx context.Context, lb *metadata.LogsBuilder, byUUID map[string]*gpu, data nvml.EventData, ret nvml.Return) {
	g := r.eventGPU(byUUID, data.Device)
	if g != nil {
		g.lost.Store(true)
	}
	lb.RecordGpuDeviceLostEvent(ctx, pcommon.NewTimestampFromTime(time.Now()), ret.Error())
	r.emitEvents(ctx, lb, g)
}

func (r *nvmlReceiver) emitEvents(ctx context.Context, lb *metadata.LogsBuilder, g *gpu) {
	if g != nil {
		lb.EmitForResource(metadata.WithLogsResource(g.resource))
	} else {
		lb.EmitForResource()
	}
	r.emitLogs(ctx, lb.Emit())
}
