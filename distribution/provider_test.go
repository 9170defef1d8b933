package distribution

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/confmap"
)

func TestProviderServesEmbeddedConfigs(t *testing.T) {
	p := NewFactory().Create(confmap.ProviderSettings{})
	if p.Scheme() != "embedded" {
		t.Fatalf("scheme %q", p.Scheme())
	}
	tests := []struct {
		uri       string
		wantKeys  []string
		wantPipes []string
	}{
		{"embedded:default", []string{"receivers::otlp", "exporters::prometheus", "exporters::file/traces", "extensions::health_check"}, []string{"traces", "metrics", "logs"}},
		{"embedded:gateway", []string{"receivers::otlp", "exporters::file/traces", "extensions::health_check"}, []string{"traces", "metrics", "logs"}},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			ret, err := p.Retrieve(context.Background(), tt.uri, nil)
			if err != nil {
				t.Fatal(err)
			}
			conf, err := ret.AsConf()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.wantKeys {
				if !conf.IsSet(k) {
					t.Errorf("%s: %s not set", tt.uri, k)
				}
			}
			for _, pipe := range tt.wantPipes {
				if !conf.IsSet("service::pipelines::" + pipe) {
					t.Errorf("%s: no %s pipeline", tt.uri, pipe)
				}
			}
		})
	}
}

func TestProviderRejectsUnknownNamesAndSchemes(t *testing.T) {
	p := NewFactory().Create(confmap.ProviderSettings{})
	if _, err := p.Retrieve(context.Background(), "embedded:nope", nil); !errors.Is(err, ErrUnknownConfig) {
		t.Errorf("embedded:nope: err = %v, want ErrUnknownConfig", err)
	}
	if _, err := p.Retrieve(context.Background(), "file:/etc/hosts", nil); err == nil {
		t.Error("file: uri accepted by the embedded provider")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestDefaultBindsOnlyLoopback(t *testing.T) {
	raw, err := Config("default")
	if err != nil {
		t.Fatal(err)
	}
	ret, err := confmap.NewRetrievedFromYAML(raw)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := ret.AsConf()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{
		"receivers::otlp::protocols::grpc::endpoint",
		"receivers::otlp::protocols::http::endpoint",
		"exporters::prometheus::endpoint",
		"extensions::health_check::endpoint",
	} {
		v, _ := conf.Get(key).(string)
		if !strings.Contains(v, ":-127.0.0.1:") {
			t.Errorf("%s = %q: the default must bind loopback", key, v)
		}
	}
}
