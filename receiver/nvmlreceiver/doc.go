//go:generate go tool mdatagen metadata.yaml

// Package nvmlreceiver reports NVIDIA GPU devices and the GPU memory of each
// process that uses them, read through NVML, with Kubernetes pod attribution,
// MIG instances, XID and ECC events, and GPU-memory leak suspicion.
package nvmlreceiver // import "github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver"
