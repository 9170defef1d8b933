package distribution_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The dashboards in distribution/dashboards are what Grafana imports: a
// recent schema version, unique panel ids, a Prometheus data-source variable
// every panel and target uses (no data-source UID written in), the cluster,
// namespace and pod variables, and every panel titled, described and with
// its unit set. Their queries are run against a real Prometheus by
// internal/e2etest's TestDashboardPanelsAgainstRealPrometheus.

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
	if !strings.Contains(string(out), "SUCCESS: 15 rules found") {
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
	if n != 15 {
		t.Errorf("%d alerts, want 15", n)
	}
}

// renderTemplates renders the chart with values and returns the named
// templates' manifests.
func renderTemplates(t *testing.T, values map[string]any, templates ...string) []string {
	t.Helper()
	files := renderDir(t, values)
	var docs []string
	for _, tpl := range templates {
		docs = append(docs, manifests(files["otelcol-ai/templates/"+tpl])...)
	}
	return docs
}

func strictJSON(t *testing.T, doc string, into any) {
	t.Helper()
	js, err := yaml.YAMLToJSONStrict([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
}

// The chart carries copies of the dashboards and rules (Helm reads files
// inside the chart only); they must be the repository's.
func TestChartCarriesTheDashboardsAndRules(t *testing.T) {
	pairs := map[string]string{filepath.Join("alerts", "otelcol-ai.rules.yaml"): filepath.Join(chartDir, "files", "alerts", "otelcol-ai.rules.yaml")}
	for _, f := range dashboardFiles(t) {
		pairs[f] = filepath.Join(chartDir, "files", "dashboards", filepath.Base(f))
	}
	copies, _ := filepath.Glob(filepath.Join(chartDir, "files", "dashboards", "*.json"))
	if len(copies) != len(pairs)-1 {
		t.Errorf("chart has %d dashboards, the repository %d", len(copies), len(pairs)-1)
	}
	for src, cp := range pairs {
		a, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(cp)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s: cp %s %s", cp, src, src, cp)
		}
	}
}

// prometheusRule is prometheus-operator's monitoring.coreos.com/v1
// PrometheusRule, as much of it as the chart writes.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name     string `json:"name"`
			Interval string `json:"interval,omitempty"`
			Rules    []struct {
				Alert       string            `json:"alert,omitempty"`
				Record      string            `json:"record,omitempty"`
				Expr        string            `json:"expr"`
				For         string            `json:"for,omitempty"`
				Labels      map[string]string `json:"labels,omitempty"`
				Annotations map[string]string `json:"annotations,omitempty"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func TestChartDashboardsAndRulesRender(t *testing.T) {
	if docs := renderTemplates(t, nil, "dashboards-configmap.yaml", "prometheusrule.yaml"); len(docs) != 0 {
		t.Fatalf("off by default, rendered %d manifests", len(docs))
	}
	docs := renderTemplates(t, map[string]any{
		"dashboards": map[string]any{"enabled": true, "annotations": map[string]any{"grafana_folder": "otelcol-ai"}},
		"alerts":     map[string]any{"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}}},
	}, "dashboards-configmap.yaml", "prometheusrule.yaml")
	files := dashboardFiles(t)
	if len(docs) != len(files)+1 {
		t.Fatalf("rendered %d manifests, want %d ConfigMaps and one PrometheusRule", len(docs), len(files))
	}
	seen := map[string]bool{}
	for _, doc := range docs[:len(files)] {
		var cm corev1.ConfigMap
		strictJSON(t, doc, &cm)
		if cm.Kind != "ConfigMap" || cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "otelcol-ai" || cm.Namespace != namespace {
			t.Errorf("ConfigMap %s: kind %s, labels %v, annotations %v, namespace %s", cm.Name, cm.Kind, cm.Labels, cm.Annotations, cm.Namespace)
		}
		if len(cm.Data) != 1 {
			t.Fatalf("ConfigMap %s: %d keys, want one dashboard", cm.Name, len(cm.Data))
		}
		for key, body := range cm.Data {
			src := filepath.Join("dashboards", strings.TrimPrefix(key, "otelcol-ai-"))
			want, err := os.ReadFile(src)
			if err != nil {
				t.Fatalf("ConfigMap %s key %s: %v", cm.Name, key, err)
			}
			if body != strings.TrimSpace(string(want)) {
				t.Errorf("ConfigMap %s key %s is not %s", cm.Name, key, src)
			}
			seen[src] = true
		}
	}
	for _, f := range files {
		if !seen[f] {
			t.Errorf("%s is in no ConfigMap", f)
		}
	}

	var rule prometheusRule
	strictJSON(t, docs[len(docs)-1], &rule)
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" || rule.Metadata.Labels["release"] != "kube-prometheus-stack" {
		t.Errorf("PrometheusRule: %s %s labels %v", rule.APIVersion, rule.Kind, rule.Metadata.Labels)
	}
	// The rules file's groups, each runbook_url made absolute from the
	// default runbookBaseURL.
	const runbooks = "https://github.com/otelcol-ai/otelcol-ai/blob/main/distribution/alerts/RUNBOOKS.md"
	got, _ := json.Marshal(rule.Spec.Groups)
	if want := expectedRuleGroups(t, runbooks, nil); !sameJSON(got, want) {
		t.Errorf("the PrometheusRule's groups are not the rules file's with runbook_url under %s:\n%s\n%s", runbooks, got, want)
	}
	n := 0
	for _, g := range rule.Spec.Groups {
		n += len(g.Rules)
	}
	if n != 15 {
		t.Errorf("PrometheusRule has %d rules, want 15", n)
	}
}

// TestPrometheusRuleRunbooksAndSwitches: runbook_url is runbookBaseURL#<the
// alert's name in lower case> (none with an empty base), and an alert
// switched off in alerts.prometheusRule.alerts is left out, its group too
// when it was the group's last; values.yaml has a switch for every alert.
func TestPrometheusRuleRunbooksAndSwitches(t *testing.T) {
	off := map[string]bool{"OtelcolAIGPUMemoryLeakSuspected": true, "OtelcolAIGPUMemoryNearLimit": true, "OtelcolAIJVMsWithoutJFR": true}
	for _, base := range []string{"https://wiki.example/otelcol-ai/runbooks", ""} {
		switches := map[string]any{}
		for name := range off {
			switches[name] = false
		}
		docs := renderTemplates(t, map[string]any{"alerts": map[string]any{"prometheusRule": map[string]any{
			"enabled": true, "runbookBaseURL": base, "alerts": switches,
		}}}, "prometheusrule.yaml")
		if len(docs) != 1 {
			t.Fatalf("%d manifests, want one PrometheusRule", len(docs))
		}
		var rule prometheusRule
		strictJSON(t, docs[0], &rule)
		got, _ := json.Marshal(rule.Spec.Groups)
		if want := expectedRuleGroups(t, base, off); !sameJSON(got, want) {
			t.Errorf("runbookBaseURL %q, %v off: groups\n%s\nwant\n%s", base, off, got, want)
		}
		for _, g := range rule.Spec.Groups {
			if g.Name == "otelcol-ai.gpu" {
				t.Errorf("group otelcol-ai.gpu rendered with both its alerts off")
			}
		}
	}

	var values struct {
		Alerts struct {
			PrometheusRule struct {
				Alerts map[string]bool `json:"alerts"`
			} `json:"prometheusRule"`
		} `json:"alerts"`
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	var names []string
	for name, on := range values.Alerts.PrometheusRule.Alerts {
		names = append(names, name)
		if !on {
			t.Errorf("values.yaml switches %s off by default", name)
		}
	}
	sort.Strings(names)
	var want []string
	for _, g := range ruleFileGroups(t) {
		for _, r := range g["rules"].([]any) {
			want = append(want, r.(map[string]any)["alert"].(string))
		}
	}
	sort.Strings(want)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("values.yaml alerts.prometheusRule.alerts switches %v, the rules file has %v", names, want)
	}
}

// ruleFileGroups is alerts/otelcol-ai.rules.yaml's groups.
func ruleFileGroups(t *testing.T) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("alerts", "otelcol-ai.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var plain struct {
		Groups []map[string]any `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &plain); err != nil {
		t.Fatal(err)
	}
	return plain.Groups
}

// expectedRuleGroups is what the PrometheusRule should hold: the rules
// file's groups without the alerts in off (and groups left empty), each
// runbook_url base#<alert in lower case>, or none when base is empty.
func expectedRuleGroups(t *testing.T, base string, off map[string]bool) string {
	t.Helper()
	var groups []map[string]any
	for _, g := range ruleFileGroups(t) {
		var rules []any
		for _, r := range g["rules"].([]any) {
			rule := r.(map[string]any)
			name := rule["alert"].(string)
			if off[name] {
				continue
			}
			annotations := rule["annotations"].(map[string]any)
			delete(annotations, "runbook_url")
			if base != "" {
				annotations["runbook_url"] = base + "#" + strings.ToLower(name)
			}
			rules = append(rules, rule)
		}
		if len(rules) > 0 {
			g["rules"] = rules
			groups = append(groups, g)
		}
	}
	out, err := json.Marshal(groups)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestDefaultConfigPlacesSpanEvents: the embedded default config (the file
// the binary embeds) makes pauses visible in a stock trace UI, one span event
// per overlapping window, and the chart's agent config, merged over it, does
// not turn that off. internal/e2etest's dashboards test sees the events on spans.
func TestDefaultConfigPlacesSpanEvents(t *testing.T) {
	b, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Processors map[string]struct {
			Spans struct {
				Events     *bool `json:"events"`
				ChildSpans *bool `json:"child_spans"`
			} `json:"spans"`
		} `json:"processors"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	rc, ok := cfg.Processors["runtimecorrelation"]
	if !ok || rc.Spans.Events == nil || !*rc.Spans.Events {
		t.Errorf("config.yaml: processors::runtimecorrelation::spans::events is not true")
	}
	for _, values := range []map[string]any{nil, {"agent": map[string]any{"k8sAttributes": map[string]any{"enabled": false}}}} {
		for _, doc := range renderTemplates(t, values, "agent-configmap.yaml") {
			var cm corev1.ConfigMap
			strictJSON(t, doc, &cm)
			for key, body := range cm.Data {
				var over map[string]any
				if err := yaml.Unmarshal([]byte(body), &over); err != nil {
					t.Fatalf("%s %s: %v", cm.Name, key, err)
				}
				procs, _ := over["processors"].(map[string]any)
				if rc, ok := procs["runtimecorrelation"]; ok {
					if spans, _ := rc.(map[string]any)["spans"].(map[string]any); spans != nil {
						if ev, ok := spans["events"]; ok && ev != true {
							t.Errorf("%s %s sets runtimecorrelation spans::events %v over the default", cm.Name, key, ev)
						}
					}
				}
			}
		}
	}
}
