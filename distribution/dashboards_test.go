package distribution_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The dashboards in distribution/dashboards are what Grafana imports: a
// recent schema version, unique panel ids, a Prometheus data-source variable
// every panel and target uses (no data-source UID written in), the cluster,
// namespace and pod variables, and every panel titled, described and with
// its unit set. Their queries are run against a real Prometheus by
// internal/e2e's TestDashboardPanelsAgainstRealPrometheus.

type grafanaDashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource json.RawMessage `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID          int             `json:"id"`
		Type        string          `json:"type"`
		Title       string          `json:"title"`
		Description string          `json:"description"`
		Datasource  json.RawMessage `json:"datasource"`
		FieldConfig struct {
			Defaults struct {
				Unit string `json:"unit"`
			} `json:"defaults"`
		} `json:"fieldConfig"`
		Targets []struct {
			RefID        string          `json:"refId"`
			Expr         string          `json:"expr"`
			LegendFormat string          `json:"legendFormat"`
			Datasource   json.RawMessage `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
}

func dashboardFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("dashboards", "*.json"))
	if err != nil || len(files) < 3 {
		t.Fatalf("want the GPU, runtime and inference dashboards in dashboards/, found %v (%v)", files, err)
	}
	return files
}

var datasourceRef = `{"type":"prometheus","uid":"${datasource}"}`

func sameJSON(raw json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestDashboardsImportIntoGrafana(t *testing.T) {
	uids := map[string]string{}
	for _, f := range dashboardFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var d grafanaDashboard
			dec := json.NewDecoder(strings.NewReader(string(b)))
			if err := dec.Decode(&d); err != nil {
				t.Fatalf("not JSON Grafana reads: %v", err)
			}
			if d.UID == "" || d.Title == "" {
				t.Errorf("uid %q and title %q must be set", d.UID, d.Title)
			}
			if other, ok := uids[d.UID]; ok {
				t.Errorf("uid %q also used by %s", d.UID, other)
			}
			uids[d.UID] = f
			if d.SchemaVersion < 36 {
				t.Errorf("schemaVersion %d: want 36 or later (data-source references by object)", d.SchemaVersion)
			}
			// The variables: a Prometheus data source first, then cluster,
			// namespace and pod, each querying through the data-source variable.
			var names []string
			for i, v := range d.Templating.List {
				names = append(names, v.Name)
				if i == 0 {
					if v.Type != "datasource" || string(v.Query) != `"prometheus"` {
						t.Errorf("first variable %q: want a datasource variable of type prometheus, got type %q query %s", v.Name, v.Type, v.Query)
					}
					continue
				}
				if v.Type == "query" && !sameJSON(v.Datasource, datasourceRef) {
					t.Errorf("variable %q: datasource %s, want %s", v.Name, v.Datasource, datasourceRef)
				}
			}
			if strings.Join(names, ",") != "datasource,cluster,namespace,pod" {
				t.Errorf("variables %v: want datasource, cluster, namespace, pod", names)
			}
			if strings.Contains(string(b), `"uid": "`) {
				for _, m := range regexp.MustCompile(`"uid": "([^"]*)"`).FindAllStringSubmatch(string(b), -1) {
					if m[1] != d.UID && m[1] != "${datasource}" {
						t.Errorf("hard-coded uid %q: data sources must come from the variable", m[1])
					}
				}
			}
			ids := map[int]string{}
			if len(d.Panels) == 0 {
				t.Fatal("no panels")
			}
			for _, p := range d.Panels {
				if p.ID <= 0 {
					t.Errorf("panel %q: id %d", p.Title, p.ID)
				}
				if other, ok := ids[p.ID]; ok {
					t.Errorf("panel id %d used by %q and %q", p.ID, other, p.Title)
				}
				ids[p.ID] = p.Title
				if strings.TrimSpace(p.Title) == "" {
					t.Errorf("panel %d has no title", p.ID)
				}
				if len(strings.Fields(p.Description)) < 6 {
					t.Errorf("panel %d %q: describe it in words a new user understands (got %q)", p.ID, p.Title, p.Description)
				}
				if p.FieldConfig.Defaults.Unit == "" {
					t.Errorf("panel %d %q: no unit", p.ID, p.Title)
				}
				if p.Type != "timeseries" && p.Type != "heatmap" && p.Type != "stat" {
					t.Errorf("panel %d %q: type %q", p.ID, p.Title, p.Type)
				}
				if !sameJSON(p.Datasource, datasourceRef) {
					t.Errorf("panel %d %q: datasource %s, want %s", p.ID, p.Title, p.Datasource, datasourceRef)
				}
				if len(p.Targets) == 0 {
					t.Errorf("panel %d %q: no query", p.ID, p.Title)
				}
				for _, tg := range p.Targets {
					if tg.Expr == "" || tg.RefID == "" || tg.LegendFormat == "" {
						t.Errorf("panel %d %q: target %+v lacks expr, refId or legend", p.ID, p.Title, tg)
					}
					if !sameJSON(tg.Datasource, datasourceRef) {
						t.Errorf("panel %d %q: target datasource %s", p.ID, p.Title, tg.Datasource)
					}
					if !strings.Contains(tg.Expr, `"$cluster"`) {
						t.Errorf("panel %d %q: query ignores the cluster variable: %s", p.ID, p.Title, tg.Expr)
					}
				}
			}
		})
	}
}

// promtool is Debian's, from the prometheus package (make test-deps).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found (make test-deps installs Debian's prometheus)")
		}
		t.Skip("promtool not found (make test-deps installs Debian's prometheus)")
	}
	return p
}

func TestAlertRulesCheck(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", filepath.Join("alerts", "otelcol-ai.rules.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS: 10 rules found") {
		t.Errorf("promtool check rules: %s", out)
	}
}

// TestAlertRulesUnitTests runs promtool's unit tests and checks that every
// alert of the rules file is tested both firing and not firing.
func TestAlertRulesUnitTests(t *testing.T) {
	bin := promtool(t)
	cmd := exec.Command(bin, "test", "rules", "otelcol-ai.rules.test.yaml")
	cmd.Dir = "alerts"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	for path, into := range map[string]any{"alerts/otelcol-ai.rules.yaml": &rules, "alerts/otelcol-ai.rules.test.yaml": &tests} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				firing[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	runbooks, err := os.ReadFile(filepath.Join("alerts", "RUNBOOKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if !firing[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: tested firing %v, not firing %v: want both", r.Alert, firing[r.Alert], quiet[r.Alert])
			}
			anchor := "RUNBOOKS.md#" + strings.ToLower(r.Alert)
			if r.Annotations["runbook_url"] != anchor {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], anchor)
			}
			if !strings.Contains(string(runbooks), "\n## "+r.Alert+"\n") {
				t.Errorf("%s: no runbook section in alerts/RUNBOOKS.md", r.Alert)
			}
		}
	}
	if n != 10 {
		t.Errorf("%d alerts, want 10", n)
	}
}
