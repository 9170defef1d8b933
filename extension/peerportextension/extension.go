package peerportextension // import "github.com/otelcol-ai/otelcol-ai/extension/peerportextension"

import (
	"context"
	"net"
	"net/http"
	"net/netip"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensionmiddleware"
)

// peerPort wraps a receiver's HTTP handler. It holds nothing: Start and
// Shutdown have nothing to do.
type peerPort struct {
	component.StartFunc
	component.ShutdownFunc
}

var _ extensionmiddleware.HTTPServer = peerPort{}

// GetHTTPHandler returns the wrapper the receiver's HTTP server applies
// inside its own client-info handler, which has set client.Info.Addr to
// the peer's IP alone.
func (peerPort) GetHTTPHandler(context.Context) (extensionmiddleware.WrapHTTPHandlerFunc, error) {
	return func(_ context.Context, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, withPeerPort(r))
		}), nil
	}, nil
}

// withPeerPort returns r with client.Info.Addr set to the TCP address
// (address and port) of its connection's peer, r.RemoteAddr as the
// server's listener accepted it. Anything a client sends (headers such as
// X-Forwarded-For) plays no part. A request whose RemoteAddr is not an
// address and port (a unix socket's) is left as it is.
func withPeerPort(r *http.Request) *http.Request {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || ap.Port() == 0 {
		return r
	}
	info := client.FromContext(r.Context())
	info.Addr = net.TCPAddrFromAddrPort(ap)
	return r.WithContext(client.NewContext(r.Context(), info))
}
