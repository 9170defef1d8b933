// The local cluster's own test images' programs (no dependencies), kept out of
// the collector's module.
module otelcol-ai.local/cluster/images

go 1.25.0
