package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeBlob(t *testing.T, layout string, v any) descriptor {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	d := descriptor{Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}
	if err := os.WriteFile(blobPath(layout, d.Digest), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// fakeLayout is an OCI layout with one image per architecture, tagged
// v-<arch>, as umoci leaves it.
func fakeLayout(t *testing.T, archs ...string) string {
	t.Helper()
	layout := t.TempDir()
	if err := os.MkdirAll(filepath.Join(layout, layoutBlobFolder), 0o755); err != nil {
		t.Fatal(err)
	}
	top := index{SchemaVersion: 2}
	for _, arch := range archs {
		cfg := writeBlob(t, layout, map[string]any{"architecture": arch, "os": "linux"})
		cfg.MediaType = mediaTypeConfig
		man := writeBlob(t, layout, map[string]any{"schemaVersion": 2, "mediaType": mediaTypeImage, "config": cfg, "layers": []any{}})
		man.MediaType = mediaTypeImage
		man.Annotations = map[string]string{refAnnotation: "v-" + arch}
		top.Manifests = append(top.Manifests, man)
	}
	data, _ := json.Marshal(top)
	if err := os.WriteFile(filepath.Join(layout, layoutIndexFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return layout
}

func TestIndexNamesEachPlatform(t *testing.T) {
	layout := fakeLayout(t, "arm64", "amd64")
	d, err := writeIndex(layout, "v", []string{"v-arm64", "v-amd64"})
	if err != nil {
		t.Fatal(err)
	}
	multi, err := readJSON[index](blobPath(layout, d.Digest))
	if err != nil {
		t.Fatal(err)
	}
	if multi.MediaType != mediaTypeIndex || len(multi.Manifests) != 2 {
		t.Fatalf("index %+v", multi)
	}
	top, err := readJSON[index](filepath.Join(layout, layoutIndexFile))
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]descriptor{}
	for _, m := range top.Manifests {
		refs[m.Annotations[refAnnotation]] = m
	}
	for i, arch := range []string{"amd64", "arm64"} { // sorted by architecture
		m := multi.Manifests[i]
		if m.Platform == nil || m.Platform.Architecture != arch || m.Platform.OS != "linux" || m.Digest != refs["v-"+arch].Digest {
			t.Errorf("manifest %d: %+v, want linux/%s = %s", i, m, arch, refs["v-"+arch].Digest)
		}
	}
	if refs["v"].Digest != d.Digest || refs["v"].MediaType != mediaTypeIndex {
		t.Errorf("tag v: %+v, want the index %s", refs["v"], d.Digest)
	}
	// The same layout and refs in another order: the same index.
	again := fakeLayout(t, "amd64", "arm64")
	d2, err := writeIndex(again, "v", []string{"v-amd64", "v-arm64"})
	if err != nil {
		t.Fatal(err)
	}
	if d2.Digest != d.Digest {
		t.Errorf("index digests %s and %s for the same images", d.Digest, d2.Digest)
	}
	// Re-tagging replaces the old index entry.
	if _, err := writeIndex(layout, "v", []string{"v-amd64"}); err != nil {
		t.Fatal(err)
	}
	top, _ = readJSON[index](filepath.Join(layout, layoutIndexFile))
	if n := len(top.Manifests); n != 3 {
		t.Errorf("%d entries after re-tagging, want 3", n)
	}
}

func TestIndexRefusesBadInput(t *testing.T) {
	layout := fakeLayout(t, "amd64")
	for _, tc := range []struct {
		refs []string
		want string
	}{
		{[]string{"v-arm64"}, `no image tagged "v-arm64"`},
		{[]string{"v-amd64", "v-amd64"}, "are both linux/amd64"},
	} {
		if _, err := writeIndex(layout, "v", tc.refs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("refs %v: %v, want an error with %q", tc.refs, err, tc.want)
		}
	}
}

func TestSBOM(t *testing.T) {
	root := t.TempDir()
	app := filepath.Join(root, appDir)
	for _, d := range []string{statusDir, filepath.Join(appDir, modelsDirName, "m", "1")} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A Go binary with build info: this test's own.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		filepath.Join(app, binaryName):                            string(data),
		filepath.Join(app, ortName):                               "not really a library",
		filepath.Join(app, modelsDirName, "m", "1", "model.onnx"): "model bytes",
		filepath.Join(root, statusDir, "libc6"):                   "Package: libc6\nSource: glibc\nVersion: 2.36-9+deb12u14\nArchitecture: amd64\nMaintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>\n",
		filepath.Join(root, statusDir, "tzdata"):                  "Package: tzdata\nVersion: 2026f-0+deb12u1\nArchitecture: all\n",
	}
	for p, body := range files {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	debs := filepath.Join(t.TempDir(), "debs.sha256")
	os.WriteFile(debs, []byte(strings.Repeat("a", 64)+"  libc6_2.36-9+deb12u14_amd64.deb\n"+strings.Repeat("b", 64)+"  ./tzdata_2026f-0+deb12u1_all.deb\n"), 0o644)
	in := sbomInput{rootfs: root, debsList: debs, arch: "amd64", version: "1.2.3", ortVersion: "1.24.1", suite: "bookworm", created: time.Unix(1764547200, 0).UTC()}
	doc, err := buildSBOM(in)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]spdxPackage{}
	for _, p := range doc.Packages {
		byName[p.Name] = p
	}
	libc := byName["libc6"]
	if libc.VersionInfo != "2.36-9+deb12u14" || libc.Checksums[0].Value != strings.Repeat("a", 64) ||
		libc.ExternalRefs[0].Locator != "pkg:deb/debian/libc6@2.36-9%2Bdeb12u14?arch=amd64&distro=debian-bookworm&upstream=glibc" {
		t.Errorf("libc6: %+v", libc)
	}
	if tz := byName["tzdata"]; tz.Checksums[0].Value != strings.Repeat("b", 64) {
		t.Errorf("tzdata: %+v", tz)
	}
	sum := sha256.Sum256(data)
	if bin := byName["otelcol-ai"]; bin.VersionInfo != "1.2.3" || bin.Checksums[0].Value != hex.EncodeToString(sum[:]) || !strings.Contains(bin.SourceInfo, "go1.") {
		t.Errorf("otelcol-ai: %+v", bin)
	}
	if _, ok := byName["onnxruntime"]; !ok {
		t.Error("no onnxruntime package")
	}
	if len(doc.Files) != 1 || doc.Files[0].FileName != "./otelcol-ai/models/m/1/model.onnx" {
		t.Errorf("files %+v", doc.Files)
	}
	if doc.CreationInfo.Created != "2025-12-01T00:00:00Z" {
		t.Errorf("created %s", doc.CreationInfo.Created)
	}
	// Every relationship names elements that exist.
	ids := map[string]bool{doc.SPDXID: true}
	for _, p := range doc.Packages {
		ids[p.SPDXID] = true
	}
	for _, f := range doc.Files {
		ids[f.SPDXID] = true
	}
	for _, r := range doc.Relationships {
		if !ids[r.Element] || !ids[r.Related] {
			t.Errorf("relationship %+v names an unknown element", r)
		}
	}
	// Same input, same document.
	again, _ := buildSBOM(in)
	a, _ := json.Marshal(doc)
	b, _ := json.Marshal(again)
	if string(a) != string(b) {
		t.Error("two SBOMs of the same input differ")
	}
	// A package without its .deb checksum is refused.
	os.WriteFile(debs, []byte(strings.Repeat("a", 64)+"  libc6_2.36-9+deb12u14_amd64.deb\n"), 0o644)
	if _, err := buildSBOM(in); err == nil || !strings.Contains(err.Error(), "tzdata") {
		t.Errorf("missing checksum: %v", err)
	}
}
