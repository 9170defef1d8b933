package pythongilreceiver

import (
	"context"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/discovery"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver/internal/gil"
)

// Where a static function of a probed file was found: the values of
// otelcol_receiver_pythongil_functions's source.
const (
	sourceSymbolTable = "symbol_table"
	sourceDecoded     = "decoded"
	sourceUSDT        = "usdt"
	sourceNone        = "none"
)

// functionSources says where each static function of l was found, as the
// attribute sets of otelcol_receiver_pythongil_functions, and which were
// not found; the GC function only where GC pauses are probed (gcOn).
func functionSources(l *gil.Library, gcOn bool) (sets []attribute.Set, missing []string) {
	decoded, _ := l.Decoded()
	syms := l.Symbols()
	add := func(function, source string) {
		sets = append(sets, attribute.NewSet(attribute.String("function", function), attribute.String("source", source)))
		if source == sourceNone {
			missing = append(missing, function)
		}
	}
	for _, name := range []string{gil.SymTakeGIL, gil.SymDropGIL} {
		switch {
		case slices.Contains(decoded, name):
			add(name, sourceDecoded)
		case syms.Has(name):
			add(name, sourceSymbolTable)
		default:
			add(name, sourceNone)
		}
	}
	gc, _ := l.GC()
	switch {
	case !gcOn:
	case gc == gil.GCUSDT:
		add("gc", sourceUSDT)
	case gc != "" && slices.Contains(decoded, gc):
		add("gc", sourceDecoded)
	case gc != "":
		add("gc", sourceSymbolTable)
	default:
		add("gc", sourceNone)
	}
	return sets, missing
}

// countFunctions adds delta to otelcol_receiver_pythongil_functions for
// each of sets.
func (st *runState) countFunctions(sets []attribute.Set, delta int64) {
	if st.refusals.tel == nil {
		return
	}
	for _, s := range sets {
		st.refusals.tel.ReceiverPythongilFunctions.Add(context.Background(), delta, metric.WithAttributeSet(s))
	}
}

// logFunctions says, once per file, which static functions decoding found
// and, at warning level, which could not be found and what is then not
// measured.
func (st *runState) logFunctions(in discovery.Interpreter, l *gil.Library, missing []string) {
	decoded, decodeErr := l.Decoded()
	if len(decoded) > 0 {
		st.logger.Info("found static CPython functions by decoding their exported callers (the file has no symbol table)",
			zap.Int("pid", in.Resource.PID), zap.String("file", in.Path), zap.Strings("functions", decoded))
	}
	var lost []string
	if slices.Contains(missing, gil.SymTakeGIL) || slices.Contains(missing, gil.SymDropGIL) {
		lost = append(lost, "with wait_source: uprobes, waits end at PyEval_RestoreThread's return and forced switches and held time are not measured")
	}
	if slices.Contains(missing, "gc") {
		lost = append(lost, "no python.gc.pause windows or cpython.gc.collections")
	}
	if len(lost) == 0 {
		return
	}
	_, usdtErr := l.GC()
	st.logger.Warn("static CPython functions not found: part of the GIL is not measured in this file",
		zap.Int("pid", in.Resource.PID), zap.String("file", in.Path), zap.Strings("missing", missing),
		zap.Strings("not_measured", lost), zap.NamedError("decode", decodeErr), zap.NamedError("gc_usdt", usdtErr))
}
