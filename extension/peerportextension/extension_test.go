package peerportextension

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configmiddleware"
	"go.opentelemetry.io/collector/extension/extensiontest"
)

// TestHTTPServerSeesThePeersPort: behind a confighttp server that names
// the extension among its middlewares (as the OTLP receiver's http
// protocol does), a handler finds the client's address and port in
// client.Info — the port of the very socket the client connected from —
// where the server alone keeps the address only.
func TestHTTPServerSeesThePeersPort(t *testing.T) {
	for _, tt := range []struct {
		name        string
		middlewares bool
		wantPort    bool
	}{
		{name: "with the middleware", middlewares: true, wantPort: true},
		{name: "without it", middlewares: false, wantPort: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := component.MustNewID("peerport")
			ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(NewFactory().Type()), NewFactory().CreateDefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			cfg := confighttp.NewDefaultServerConfig()
			cfg.NetAddr.Endpoint = "127.0.0.1:0"
			if tt.middlewares {
				cfg.Middlewares = []configmiddleware.Config{{ID: id}}
			}
			seen := make(chan net.Addr, 1)
			srv, err := cfg.ToServer(context.Background(), map[component.ID]component.Component{id: ext}, componenttest.NewNopTelemetrySettings(),
				http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					seen <- client.FromContext(r.Context()).Addr
				}))
			if err != nil {
				t.Fatal(err)
			}
			ln, err := cfg.ToListener(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = srv.Serve(ln) }()
			defer srv.Close()

			var local net.Addr
			tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err == nil {
					local = c.LocalAddr()
				}
				return c, err
			}}
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/", nil)
			req.Header.Set("X-Forwarded-For", "10.9.9.9:1234") // a client's claim: never used
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got := <-seen
			tcp, isTCP := got.(*net.TCPAddr)
			if tt.wantPort {
				if !isTCP || tcp.String() != local.String() {
					t.Fatalf("client.Info.Addr = %#v, want the client's socket %v", got, local)
				}
				return
			}
			if isTCP {
				t.Fatalf("client.Info.Addr = %v without the middleware, want the address alone", got)
			}
		})
	}
}

func TestRemoteAddrThatIsNotAnAddressAndPortIsLeft(t *testing.T) {
	r, _ := http.NewRequest(http.MethodPost, "http://x/", nil)
	r.RemoteAddr = "@"
	if got := withPeerPort(r); got != r {
		t.Error("a request from a unix socket was changed")
	}
}
