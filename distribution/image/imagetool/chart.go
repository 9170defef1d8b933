package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"
)

// chartCmd is `helm package --version V --app-version V` followed by
// `helm repo index`, with the Helm SDK this module already builds (helm's
// pkg/repo would pull in its registry and Kubernetes client modules).
func chartCmd(args []string) error {
	fl := flag.NewFlagSet("chart", flag.ContinueOnError)
	dir := fl.String("chart", "", "chart folder")
	version := fl.String("version", "", "chart version and appVersion (SemVer)")
	out := fl.String("o", "", "output folder: the package and index.yaml")
	url := fl.String("url", "", "base URL the repository is served from (index.yaml's urls are relative without it)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *version == "" || *out == "" {
		return fmt.Errorf("-chart, -version and -o are required")
	}
	pkg, err := packageChart(*dir, *version, *out)
	if err != nil {
		return err
	}
	created := time.Now().UTC()
	if t, err := sourceDate(); err == nil {
		created = t
	}
	if err := writeRepoIndex(*out, pkg, *url, created); err != nil {
		return err
	}
	fmt.Println(pkg)
	return nil
}

// packageChart writes <name>-<version>.tgz into out, with version and
// appVersion set to version, after the chart's own metadata checks.
func packageChart(dir, version, out string) (string, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return "", err
	}
	ch.Metadata.Version = version
	ch.Metadata.AppVersion = version
	if err := ch.Validate(); err != nil {
		return "", fmt.Errorf("%s: %w", dir, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	return chartutil.Save(ch, out)
}

// repoEntry is one chart version in a repository index, as helm repo index
// writes it: the chart's metadata, its URLs, digest and time.
type repoEntry struct {
	*chart.Metadata
	URLs    []string  `json:"urls"`
	Created time.Time `json:"created"`
	Digest  string    `json:"digest"`
}

type repoIndex struct {
	APIVersion string                  `json:"apiVersion"`
	Entries    map[string][]*repoEntry `json:"entries"`
	Generated  time.Time               `json:"generated"`
}

func writeRepoIndex(out, pkg, baseURL string, created time.Time) error {
	ch, err := loader.LoadFile(pkg)
	if err != nil {
		return fmt.Errorf("%s: %w", pkg, err)
	}
	f, err := os.Open(pkg)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return err
	}
	u := filepath.Base(pkg)
	if baseURL != "" {
		u = strings.TrimSuffix(baseURL, "/") + "/" + u
	}
	idx := repoIndex{
		APIVersion: "v1",
		Entries: map[string][]*repoEntry{ch.Name(): {{
			Metadata: ch.Metadata, URLs: []string{u}, Created: created, Digest: hex.EncodeToString(h.Sum(nil)),
		}}},
		Generated: created,
	}
	data, err := yaml.Marshal(idx)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "index.yaml"), data, 0o644)
}
