package doccheck_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension"
	"github.com/otelcol-ai/otelcol-ai/extension/peerportextension"
	"github.com/otelcol-ai/otelcol-ai/extension/runtimestateextension"
	"github.com/otelcol-ai/otelcol-ai/extension/timelineextension"
	"github.com/otelcol-ai/otelcol-ai/internal/doccheck"
	"github.com/otelcol-ai/otelcol-ai/processor/inferenceprocessor"
	"github.com/otelcol-ai/otelcol-ai/processor/runtimecorrelationprocessor"
	"github.com/otelcol-ai/otelcol-ai/receiver/jfrreceiver"
	"github.com/otelcol-ai/otelcol-ai/receiver/nvmlreceiver"
	"github.com/otelcol-ai/otelcol-ai/receiver/pythongilreceiver"
)

const module = "github.com/otelcol-ai/otelcol-ai"

// components are the project's own components: their folder and their
// default config.
var components = []struct {
	dir string
	cfg component.Config
}{
	{"receiver/nvmlreceiver", nvmlreceiver.NewFactory().CreateDefaultConfig()},
	{"receiver/jfrreceiver", jfrreceiver.NewFactory().CreateDefaultConfig()},
	{"receiver/pythongilreceiver", pythongilreceiver.NewFactory().CreateDefaultConfig()},
	{"processor/runtimecorrelationprocessor", runtimecorrelationprocessor.NewFactory().CreateDefaultConfig()},
	{"processor/inferenceprocessor", inferenceprocessor.NewFactory().CreateDefaultConfig()},
	{"extension/onnxinferenceextension", onnxinferenceextension.NewFactory().CreateDefaultConfig()},
	{"extension/timelineextension", timelineextension.NewFactory().CreateDefaultConfig()},
	{"extension/peerportextension", peerportextension.NewFactory().CreateDefaultConfig()},
	{"extension/runtimestateextension", runtimestateextension.NewFactory().CreateDefaultConfig()},
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func report(t *testing.T, problems []doccheck.Problem) {
	t.Helper()
	for _, p := range doccheck.Strings(problems) {
		t.Error(p)
	}
}

// TestComponentREADMEsDocumentTheirConfig: every key a component's README
// documents is a key of its config, written as users write it (a::b), and
// every key of its own config structs is documented.
func TestComponentREADMEsDocumentTheirConfig(t *testing.T) {
	root := repoRoot(t)
	for _, c := range components {
		t.Run(c.dir, func(t *testing.T) {
			doc := c.dir + "/README.md"
			keys := doccheck.ConfigKeys(c.cfg, module)
			documented := doccheck.DocumentedKeys(read(t, filepath.Join(root, doc)))
			report(t, doccheck.CompareKeys(doc, documented, keys))
		})
	}
}

// metadata is what a component's metadata.yaml declares.
type metadata struct {
	Metrics   map[string]any `yaml:"metrics"`
	Events    map[string]any `yaml:"events"`
	Telemetry struct {
		Metrics map[string]any `yaml:"metrics"`
	} `yaml:"telemetry"`
}

// emitted returns the names a component's metadata.yaml declares: its
// metrics and events, and its own telemetry as Prometheus names it
// (otelcol_ first).
func emitted(t *testing.T, dir string) []string {
	t.Helper()
	var md metadata
	if err := yaml.Unmarshal([]byte(read(t, filepath.Join(dir, "metadata.yaml"))), &md); err != nil {
		t.Fatal(err)
	}
	var out []string
	for name := range md.Metrics {
		out = append(out, name)
	}
	for name := range md.Events {
		out = append(out, name)
	}
	for name := range md.Telemetry.Metrics {
		out = append(out, "otelcol_"+name)
	}
	slices.Sort(out)
	return out
}

// TestComponentMetricsDocumented: documentation.md (mdatagen's) names every
// metric, event and telemetry metric metadata.yaml declares and nothing
// else; every metric a README's metric table names is declared, or built
// by hand under that name in the component's code.
func TestComponentMetricsDocumented(t *testing.T) {
	root := repoRoot(t)
	for _, c := range components {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join(root, c.dir)
			if _, err := os.Stat(filepath.Join(dir, "metadata.yaml")); err != nil {
				t.Fatal(err)
			}
			code := emitted(t, dir)
			if generated, err := os.ReadFile(filepath.Join(dir, "documentation.md")); err == nil {
				report(t, doccheck.CompareMetrics(c.dir+"/documentation.md", doccheck.GeneratedMetrics(string(generated)), code))
			} else if len(code) > 0 {
				t.Errorf("%s: no documentation.md for %d declared metrics (go generate runs mdatagen)", c.dir, len(code))
			}
			literals, err := doccheck.StringLiterals(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range doccheck.DocumentedMetrics(read(t, filepath.Join(dir, "README.md"))) {
				if !slices.Contains(code, name) && !literals[name] {
					t.Errorf("%s/README.md: documents metric %q, which neither metadata.yaml declares nor the code names", c.dir, name)
				}
			}
		})
	}
}

// notInBinary leaves out what is not compiled into the collector: tools,
// examples, the build output, test harnesses and helper packages (named
// *test).
func notInBinary(rel string) bool {
	for _, p := range []string{"cmd", "examples", "dist", "distribution/image", "distribution/cluster", "internal/e2etest", "node_modules"} {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return strings.HasSuffix(filepath.Base(rel), "test")
}

// TestEmbeddedConfigHeadersListTheirVariables: the header of each embedded
// configuration lists exactly the variables the file substitutes, with the
// defaults it uses; the default configuration's header also lists exactly
// the variables the collector's code reads from its own environment.
func TestEmbeddedConfigHeadersListTheirVariables(t *testing.T) {
	root := repoRoot(t)
	reads, problems, err := doccheck.ReadEnv(root, notInBinary)
	if err != nil {
		t.Fatal(err)
	}
	report(t, problems)
	readNames := map[string]string{}
	for name := range reads {
		readNames[name] = ""
	}
	for _, file := range []string{"distribution/config.yaml", "distribution/gateway.yaml"} {
		yamlText := read(t, filepath.Join(root, file))
		h := doccheck.ParseHeader(yamlText)
		report(t, doccheck.CompareEnv(file, "substituted into the file", h.Substituted, doccheck.EnvUses(yamlText), true))
		if file == "distribution/config.yaml" {
			report(t, doccheck.CompareEnv(file, "read by the collector's code", h.Read, readNames, false))
		}
	}
	t.Logf("variables the collector reads: %v", reads)
}

// TestDocLinksStayInTheRepository: every relative link of the project's
// user documentation leads to a file or folder of the repository.
func TestDocLinksStayInTheRepository(t *testing.T) {
	root := repoRoot(t)
	docs := []string{"README.md", "CHANGELOG.md", "distribution/alerts/RUNBOOKS.md", "examples/hybrid/README.md"}
	for _, c := range components {
		docs = append(docs, c.dir+"/README.md")
	}
	for _, doc := range docs {
		problems, err := doccheck.CheckLinks(root, doc)
		if err != nil {
			t.Fatal(err)
		}
		report(t, problems)
	}
}
