package distribution_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/e2etest"
)

// TestVersionIsTheBuilds: the binary's --version and the service.version of
// its own telemetry are the version `make build` stamped (`make version`,
// from git tags), which `make test` passes as $OTELCOL_AI_VERSION. (The
// chart's appVersion: TestChartPackage.) About 5 s.
func TestVersionIsTheBuilds(t *testing.T) {
	want := os.Getenv("OTELCOL_AI_VERSION")
	if want == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("OTELCOL_AI_VERSION unset under CI: run through `make test`")
		}
		t.Skip("OTELCOL_AI_VERSION unset: `make test` sets it to `make version`")
	}
	res := e2etest.Run(t, nil, "--version")
	if got := strings.TrimSpace(res.Stdout); res.ExitCode != 0 || got != "otelcol-ai version "+want {
		t.Fatalf("--version: exit %d, %q; want %q", res.ExitCode, got, "otelcol-ai version "+want)
	}

	c := e2etest.Start(t, e2etest.Options{Configs: []string{"embedded:default"}})
	if err := c.WaitHealthy(time.Minute); err != nil {
		t.Fatal(err)
	}
	var body string
	re := regexp.MustCompile(`(?m)^target_info\{[^}]*\bservice_version="([^"]*)"`)
	var got []string
	err := c.Eventually(30*time.Second, func() bool {
		var err error
		body, err = e2etest.Get("http://" + c.Endpoints.Telemetry + "/metrics")
		got = re.FindStringSubmatch(body)
		return err == nil && got != nil
	})
	if err != nil {
		t.Fatalf("no target_info with service_version on the collector's own metrics: %v\n%.2000s", err, body)
	}
	if got[1] != want {
		t.Errorf("service.version of the collector's own telemetry %q, want %q", got[1], want)
	}
	if code, err := c.Stop(30 * time.Second); err != nil || code != 0 {
		t.Errorf("stop: exit %d, %v", code, err)
	}
}
