//go:generate go tool mdatagen metadata.yaml

// Package peerportextension is an HTTP server middleware for receivers
// (the OTLP receiver's `http` protocol): it puts the client's address and
// port into the request's client.Info, where the collector's HTTP server
// keeps only the address. With the port, a processor that names the
// process behind a connection (runtimecorrelation, through
// internal/procsocket) finds the one socket a request came over, instead
// of every process connected from that address.
package peerportextension // import "github.com/otelcol-ai/otelcol-ai/extension/peerportextension"
