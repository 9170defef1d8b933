// Command imagetool is the part of `make image` and `make chart` that the
// Debian tools do not do: it writes the image's SBOM (SPDX 2.3 JSON) from the
// root filesystem that went into it, joins the per-architecture images of an
// OCI layout into one multi-platform image index, and packages the Helm
// chart with a repository index.
//
//	imagetool sbom -rootfs DIR -debs FILE -arch ARCH -version V -o FILE
//	imagetool index -layout DIR -tag V -refs V-amd64,V-arm64
//	imagetool chart -chart DIR -version V -o DIR [-url URL]
//
// The SBOM and the index are functions of their inputs only (no clock, no
// random document namespace, sorted), so that two builds give the same bytes.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/textproto"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: imagetool sbom|index|chart [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "sbom":
		err = sbomCmd(os.Args[2:])
	case "index":
		err = indexCmd(os.Args[2:])
	case "chart":
		err = chartCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (want sbom, index or chart)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagetool:", err)
		os.Exit(1)
	}
}

// Image layout paths, as distribution/image/build.sh writes them.
const (
	appDir        = "otelcol-ai"
	binaryName    = "otelcol-ai"
	ortName       = "libonnxruntime.so.1"
	modelsDirName = "models"
	statusDir     = "var/lib/dpkg/status.d"
)

func sbomCmd(args []string) error {
	fl := flag.NewFlagSet("sbom", flag.ContinueOnError)
	rootfs := fl.String("rootfs", "", "the image's root filesystem")
	debs := fl.String("debs", "", "sha256sum listing of the .deb files that went in")
	arch := fl.String("arch", "", "Debian/Go architecture (amd64, arm64)")
	version := fl.String("version", "", "otelcol-ai version")
	ortVersion := fl.String("ort-version", "", "onnxruntime-node version the library came from")
	suite := fl.String("suite", "bookworm", "Debian suite")
	out := fl.String("o", "", "output file")
	if err := fl.Parse(args); err != nil {
		return err
	}
	var missing []string
	for name, v := range map[string]string{"rootfs": *rootfs, "debs": *debs, "arch": *arch, "version": *version, "o": *out} {
		if v == "" {
			missing = append(missing, "-"+name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	created, err := sourceDate()
	if err != nil {
		return err
	}
	doc, err := buildSBOM(sbomInput{
		rootfs: *rootfs, debsList: *debs, arch: *arch, version: *version,
		ortVersion: *ortVersion, suite: *suite, created: created,
	})
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(*out, append(data, '\n'), 0o644)
}

// sourceDate is SOURCE_DATE_EPOCH as a time: the SBOM's creation time.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Time{}, errors.New("SOURCE_DATE_EPOCH is not set (the SBOM's creation time must not be the clock's)")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
	}
	return time.Unix(n, 0).UTC(), nil
}

type sbomInput struct {
	rootfs, debsList, arch, version, ortVersion, suite string
	created                                            time.Time
}

// SPDX 2.3 JSON, the fields this SBOM uses.
type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Files             []spdxFile         `json:"files,omitempty"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID           string         `json:"SPDXID"`
	Name             string         `json:"name"`
	VersionInfo      string         `json:"versionInfo,omitempty"`
	Supplier         string         `json:"supplier,omitempty"`
	DownloadLocation string         `json:"downloadLocation"`
	FilesAnalyzed    bool           `json:"filesAnalyzed"`
	Checksums        []spdxChecksum `json:"checksums,omitempty"`
	LicenseConcluded string         `json:"licenseConcluded"`
	LicenseDeclared  string         `json:"licenseDeclared"`
	CopyrightText    string         `json:"copyrightText"`
	SourceInfo       string         `json:"sourceInfo,omitempty"`
	PrimaryPurpose   string         `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs     []spdxRef      `json:"externalRefs,omitempty"`
}

type spdxFile struct {
	SPDXID           string         `json:"SPDXID"`
	FileName         string         `json:"fileName"`
	Checksums        []spdxChecksum `json:"checksums"`
	LicenseConcluded string         `json:"licenseConcluded"`
	CopyrightText    string         `json:"copyrightText"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

const noAssertion = "NOASSERTION"

func buildSBOM(in sbomInput) (*spdxDoc, error) {
	imageID := "SPDXRef-Package-image"
	doc := &spdxDoc{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        fmt.Sprintf("otelcol-ai-%s-linux-%s", in.version, in.arch),
		// Derived from what the image is, not random: same inputs, same document.
		DocumentNamespace: fmt.Sprintf("https://github.com/otelcol-ai/otelcol-ai/spdx/image/%s/linux-%s", in.version, in.arch),
		CreationInfo: spdxCreation{
			Created:  in.created.Format(time.RFC3339),
			Creators: []string{"Tool: otelcol-ai-imagetool", "Organization: otelcol-ai"},
		},
	}
	doc.Packages = append(doc.Packages, spdxPackage{
		SPDXID: imageID, Name: "otelcol-ai-image", VersionInfo: in.version,
		DownloadLocation: noAssertion, LicenseConcluded: noAssertion, LicenseDeclared: noAssertion,
		CopyrightText: noAssertion, PrimaryPurpose: "CONTAINER",
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", imageID})
	contains := func(id string) {
		doc.Relationships = append(doc.Relationships, spdxRelationship{imageID, "CONTAINS", id})
	}

	debs, err := debianPackages(in)
	if err != nil {
		return nil, err
	}
	for _, p := range debs {
		doc.Packages = append(doc.Packages, p)
		contains(p.SPDXID)
	}

	app := filepath.Join(in.rootfs, appDir)
	bin := filepath.Join(app, binaryName)
	binSum, err := fileSHA256(bin)
	if err != nil {
		return nil, err
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("%s: Go build info: %w", bin, err)
	}
	binID := "SPDXRef-Package-otelcol-ai"
	doc.Packages = append(doc.Packages, spdxPackage{
		SPDXID: binID, Name: "otelcol-ai", VersionInfo: in.version,
		Supplier: "Organization: otelcol-ai", DownloadLocation: "https://github.com/otelcol-ai/otelcol-ai",
		Checksums:        []spdxChecksum{{"SHA256", binSum}},
		LicenseConcluded: "Apache-2.0", LicenseDeclared: "Apache-2.0", CopyrightText: noAssertion,
		SourceInfo:     fmt.Sprintf("/%s/%s, built by %s (%s)", appDir, binaryName, info.GoVersion, buildSettings(info)),
		PrimaryPurpose: "APPLICATION",
		ExternalRefs:   []spdxRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + info.Main.Path + "@" + purlVersion(in.version)}},
	})
	contains(binID)
	deps := append([]*debug.Module(nil), info.Deps...)
	sort.Slice(deps, func(i, j int) bool { return deps[i].Path < deps[j].Path })
	for _, m := range deps {
		if m.Replace != nil {
			m = m.Replace
		}
		id := spdxID("Go", m.Path+"-"+m.Version)
		p := spdxPackage{
			SPDXID: id, Name: m.Path, VersionInfo: m.Version, DownloadLocation: noAssertion,
			LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
			PrimaryPurpose: "LIBRARY",
		}
		if m.Version != "" && m.Version != "(devel)" {
			p.ExternalRefs = []spdxRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + m.Path + "@" + m.Version}}
		}
		if m.Sum != "" {
			p.SourceInfo = "go.sum " + m.Sum
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{binID, "DEPENDS_ON", id})
	}

	ort := filepath.Join(app, ortName)
	ortSum, err := fileSHA256(ort)
	if err != nil {
		return nil, err
	}
	ortID := "SPDXRef-Package-onnxruntime"
	ortPkg := spdxPackage{
		SPDXID: ortID, Name: "onnxruntime", VersionInfo: in.ortVersion,
		Supplier: "Organization: Microsoft", DownloadLocation: noAssertion,
		Checksums:        []spdxChecksum{{"SHA256", ortSum}},
		LicenseConcluded: noAssertion, LicenseDeclared: "MIT", CopyrightText: noAssertion,
		SourceInfo:     fmt.Sprintf("/%s/%s, from the npm package onnxruntime-node@%s", appDir, ortName, in.ortVersion),
		PrimaryPurpose: "LIBRARY",
	}
	if in.ortVersion != "" {
		ortPkg.DownloadLocation = "https://registry.npmjs.org/onnxruntime-node/-/onnxruntime-node-" + in.ortVersion + ".tgz"
		ortPkg.ExternalRefs = []spdxRef{{"PACKAGE-MANAGER", "purl", "pkg:npm/onnxruntime-node@" + in.ortVersion}}
	}
	doc.Packages = append(doc.Packages, ortPkg)
	contains(ortID)

	models := filepath.Join(app, modelsDirName)
	var files []string
	err = filepath.WalkDir(models, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	sort.Strings(files)
	for _, p := range files {
		sum, err := fileSHA256(p)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(in.rootfs, p)
		id := spdxID("File", rel)
		doc.Files = append(doc.Files, spdxFile{
			SPDXID: id, FileName: "./" + filepath.ToSlash(rel), Checksums: []spdxChecksum{{"SHA256", sum}},
			LicenseConcluded: noAssertion, CopyrightText: noAssertion,
		})
		contains(id)
	}
	return doc, nil
}

func buildSettings(info *buildinfo.BuildInfo) string {
	var parts []string
	for _, s := range info.Settings {
		switch s.Key {
		case "GOOS", "GOARCH", "CGO_ENABLED", "-trimpath", "-ldflags", "-tags":
			parts = append(parts, s.Key+"="+s.Value)
		}
	}
	return strings.Join(parts, " ")
}

// purlVersion: a purl version may not hold '+'.
func purlVersion(v string) string { return strings.ReplaceAll(v, "+", "%2B") }

// debianPackages reads the control paragraphs build.sh left in
// var/lib/dpkg/status.d (one per package, as distroless images keep them) and
// the checksums of the .deb files they came from.
func debianPackages(in sbomInput) ([]spdxPackage, error) {
	sums := map[string]string{} // file name → sha256
	f, err := os.Open(in.debsList)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, path, ok := strings.Cut(strings.TrimSpace(sc.Text()), "  ")
		if !ok {
			continue
		}
		sums[filepath.Base(path)] = sum
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(in.rootfs, statusDir))
	if err != nil {
		return nil, err
	}
	var out []spdxPackage
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(in.rootfs, statusDir, e.Name()))
		if err != nil {
			return nil, err
		}
		h, err := textproto.NewReader(bufio.NewReader(io.MultiReader(bytes.NewReader(data), strings.NewReader("\n\n")))).ReadMIMEHeader()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		name, version, arch := h.Get("Package"), h.Get("Version"), h.Get("Architecture")
		if name == "" || version == "" || arch == "" {
			return nil, fmt.Errorf("%s: control paragraph without Package, Version or Architecture", e.Name())
		}
		deb := fmt.Sprintf("%s_%s_%s.deb", name, strings.ReplaceAll(version, ":", "%3a"), arch)
		sum, ok := sums[deb]
		if !ok {
			return nil, fmt.Errorf("%s: no checksum for %s in %s", e.Name(), deb, in.debsList)
		}
		src := h.Get("Source")
		if src == "" {
			src = name
		}
		purl := fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s&distro=debian-%s", name, purlVersion(version), arch, in.suite)
		if s, _, _ := strings.Cut(src, " "); s != name {
			purl += "&upstream=" + s
		}
		out = append(out, spdxPackage{
			SPDXID: spdxID("DEB", name+"-"+arch), Name: name, VersionInfo: version,
			Supplier:         "Organization: " + firstNonEmpty(h.Get("Maintainer"), "Debian"),
			DownloadLocation: "http://deb.debian.org/debian/pool/main/", FilesAnalyzed: false,
			Checksums:        []spdxChecksum{{"SHA256", sum}},
			LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
			SourceInfo:     "Debian " + in.suite + " source package " + src + ", " + deb,
			PrimaryPurpose: "LIBRARY",
			ExternalRefs:   []spdxRef{{"PACKAGE-MANAGER", "purl", purl}},
		})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no Debian packages in %s", filepath.Join(in.rootfs, statusDir))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// spdxID makes an SPDX identifier ([A-Za-z0-9.-]) from free text.
func spdxID(kind, s string) string {
	var b strings.Builder
	b.WriteString("SPDXRef-" + kind + "-")
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
