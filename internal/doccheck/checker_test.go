package doccheck_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/otelcol-ai/otelcol-ai/internal/doccheck"
)

// fixtureConfig is a component config as the checker sees one: a nested
// section, a list of structs, a map of structs, and a squashed struct
// from another module's kind (here the same package: its keys count).
type fixtureConfig struct {
	Windows fixtureWindows          `mapstructure:"windows"`
	Outputs []fixtureOutput         `mapstructure:"outputs"`
	Models  map[string]fixtureModel `mapstructure:"models"`
}

type fixtureWindows struct {
	Retention  time.Duration `mapstructure:"retention"`
	MaxWindows int           `mapstructure:"max_windows"`
}

type fixtureOutput struct {
	Output string `mapstructure:"output"`
}

type fixtureModel struct {
	VersionPolicy fixturePolicy `mapstructure:"version_policy"`
}

type fixturePolicy struct {
	Latest int   `mapstructure:"latest"`
	All    *bool `mapstructure:"all"`
}

// TestConfigKeysFromTags: the keys are the mapstructure tags, nested with
// ::, lists and maps with their placeholders.
func TestConfigKeysFromTags(t *testing.T) {
	var got []string
	for _, k := range doccheck.ConfigKeys(&fixtureConfig{}, module) {
		got = append(got, k.Path)
	}
	want := []string{"windows", "windows::retention", "windows::max_windows", "outputs", "outputs[]::output",
		"models", "models::<>::version_policy", "models::<>::version_policy::latest", "models::<>::version_policy::all"}
	if !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
}

// TestCheckerFailsOnAWrongKey: a README documenting a key the config does
// not have (a typo), a key written with dots, and so leaving two keys
// undocumented, gets one problem for each; the same README with the keys
// right gets none.
func TestCheckerFailsOnAWrongKey(t *testing.T) {
	keys := doccheck.ConfigKeys(&fixtureConfig{}, module)
	tests := []struct {
		doc  string
		want []string
	}{
		{"wrong-key.md", []string{
			`wrong-key.md: config key "windows.max_windows" is written with dots: write "windows::max_windows"`,
			`wrong-key.md: documents config key "windows::retenton", which the config does not have`,
			`wrong-key.md: does not document config key "windows::max_windows"`,
			`wrong-key.md: does not document config key "windows::retention"`,
		}},
		{"right-key.md", nil},
	}
	for _, tt := range tests {
		t.Run(tt.doc, func(t *testing.T) {
			documented := doccheck.DocumentedKeys(read(t, filepath.Join("testdata", tt.doc)))
			got := doccheck.Strings(doccheck.CompareKeys(tt.doc, documented, keys))
			if !slices.Equal(got, tt.want) {
				t.Errorf("problems:\n%q\nwant:\n%q", got, tt.want)
			}
		})
	}
}

// TestDocumentedMetricsFromMetricTables: the first column of "metric"
// tables, without the {attribute} list; "key" tables are not metrics.
func TestDocumentedMetricsFromMetricTables(t *testing.T) {
	got := doccheck.DocumentedMetrics(read(t, filepath.Join("testdata", "right-key.md")))
	if want := []string{"runtime.overlap.count", "otelcol_processor_x_dropped"}; !slices.Equal(got, want) {
		t.Errorf("metrics %q, want %q", got, want)
	}
	problems := doccheck.Strings(doccheck.CompareMetrics("documentation.md", []string{"runtime.overlap.count", "runtime.overlap.cuont"},
		[]string{"runtime.overlap.count", "runtime.overlap.duration"}))
	want := []string{
		`documentation.md: documents metric "runtime.overlap.cuont", which the code does not emit`,
		`documentation.md: does not document metric "runtime.overlap.duration"`,
	}
	if !slices.Equal(problems, want) {
		t.Errorf("problems %q, want %q", problems, want)
	}
}

// TestCheckerFailsOnAWrongVariable: a header that lists the JVM's opt-out
// (OTELCOL_AI_JFR_ATTACH) instead of the variable the file substitutes
// (OTELCOL_AI_JFR_ATTACH_ENABLED), with another default than the file's,
// and misses a variable the code reads, gets one problem for each.
func TestCheckerFailsOnAWrongVariable(t *testing.T) {
	yaml := read(t, filepath.Join("testdata", "wrong-header.yaml"))
	h := doccheck.ParseHeader(yaml)
	problems := doccheck.CompareEnv("wrong-header.yaml", "substituted into the file", h.Substituted, doccheck.EnvUses(yaml), true)
	problems = append(problems, doccheck.CompareEnv("wrong-header.yaml", "read by the collector's code", h.Read,
		map[string]string{"OTELCOL_AI_MODEL_REPOSITORY": "", "K8S_NODE_NAME": ""}, false)...)
	got := doccheck.Strings(problems)
	want := []string{
		`wrong-header.yaml: K8S_NODE_NAME is read by the collector's code, but the header does not list it`,
		`wrong-header.yaml: OTELCOL_AI_JFR_ATTACH_ENABLED is substituted into the file, but the header does not list it`,
		`wrong-header.yaml: header lists OTELCOL_AI_JFR_ATTACH as substituted into the file, but nothing does`,
		`wrong-header.yaml: header says OTELCOL_AI_OUTPUT_DIR defaults to "./output", the file's ${env:…} to "./out"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%q\nwant:\n%q", got, want)
	}
}

// TestCheckerFailsOnALinkOutOfTheRepository: a link or a path written as
// code that leaves the repository, and a link to nothing, are problems;
// links within it, to a page anchor and to the web are not. (The fixture
// is not a .md file: internal/docs allows no web link in the docs.)
func TestCheckerFailsOnALinkOutOfTheRepository(t *testing.T) {
	root := repoRoot(t)
	doc := "internal/doccheck/testdata/links.txt"
	problems, err := doccheck.CheckLinks(root, doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		doc + `: links "../../../../notes/COLLECTOR.md", outside the repository`,
		doc + `: links "../../../../shared/ARCHITECTURE.md", outside the repository`,
		doc + `: links "missing.md", which does not exist`,
	}
	if got := doccheck.Strings(problems); !slices.Equal(got, want) {
		t.Errorf("problems:\n%q\nwant:\n%q", got, want)
	}
}
