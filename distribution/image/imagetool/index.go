package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const (
	refAnnotation    = "org.opencontainers.image.ref.name"
	mediaTypeIndex   = "application/vnd.oci.image.index.v1+json"
	mediaTypeImage   = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig  = "application/vnd.oci.image.config.v1+json"
	layoutIndexFile  = "index.json"
	layoutBlobFolder = "blobs/sha256"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

type index struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType,omitempty"`
	Manifests     []descriptor      `json:"manifests"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type manifest struct {
	MediaType string     `json:"mediaType"`
	Config    descriptor `json:"config"`
}

type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant"`
}

// indexCmd adds to an OCI layout an image index naming the images tagged
// refs, each with the platform its config says, and tags the index.
func indexCmd(args []string) error {
	fl := flag.NewFlagSet("index", flag.ContinueOnError)
	layout := fl.String("layout", "", "OCI image layout folder")
	tag := fl.String("tag", "", "tag for the index")
	refs := fl.String("refs", "", "comma-separated tags of the per-platform images")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *layout == "" || *tag == "" || *refs == "" {
		return fmt.Errorf("-layout, -tag and -refs are required")
	}
	d, err := writeIndex(*layout, *tag, strings.Split(*refs, ","))
	if err != nil {
		return err
	}
	fmt.Println(d.Digest)
	return nil
}

func writeIndex(layout, tag string, refs []string) (descriptor, error) {
	top, err := readJSON[index](filepath.Join(layout, layoutIndexFile))
	if err != nil {
		return descriptor{}, err
	}
	byRef := map[string]descriptor{}
	for _, m := range top.Manifests {
		byRef[m.Annotations[refAnnotation]] = m
	}
	multi := index{SchemaVersion: 2, MediaType: mediaTypeIndex}
	seen := map[platform]string{}
	for _, ref := range refs {
		m, ok := byRef[ref]
		if !ok {
			return descriptor{}, fmt.Errorf("%s: no image tagged %q", layout, ref)
		}
		if m.MediaType != mediaTypeImage {
			return descriptor{}, fmt.Errorf("%s: %q is a %s, not an image manifest", layout, ref, m.MediaType)
		}
		man, err := readJSON[manifest](blobPath(layout, m.Digest))
		if err != nil {
			return descriptor{}, err
		}
		if man.Config.MediaType != mediaTypeConfig {
			return descriptor{}, fmt.Errorf("%s: config of %q is a %s", layout, ref, man.Config.MediaType)
		}
		cfg, err := readJSON[imageConfig](blobPath(layout, man.Config.Digest))
		if err != nil {
			return descriptor{}, err
		}
		if cfg.Architecture == "" || cfg.OS == "" {
			return descriptor{}, fmt.Errorf("%s: config of %q names no architecture or os", layout, ref)
		}
		p := platform{Architecture: cfg.Architecture, OS: cfg.OS, Variant: cfg.Variant}
		if other, dup := seen[p]; dup {
			return descriptor{}, fmt.Errorf("%s: %q and %q are both %s/%s", layout, other, ref, p.OS, p.Architecture)
		}
		seen[p] = ref
		multi.Manifests = append(multi.Manifests, descriptor{
			MediaType: m.MediaType, Digest: m.Digest, Size: m.Size, Platform: &p,
		})
	}
	sort.Slice(multi.Manifests, func(i, j int) bool {
		return multi.Manifests[i].Platform.Architecture < multi.Manifests[j].Platform.Architecture
	})
	data, err := json.Marshal(multi)
	if err != nil {
		return descriptor{}, err
	}
	sum := sha256.Sum256(data)
	d := descriptor{
		MediaType: mediaTypeIndex, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data)),
		Annotations: map[string]string{refAnnotation: tag},
	}
	if err := os.WriteFile(blobPath(layout, d.Digest), data, 0o644); err != nil {
		return descriptor{}, err
	}
	kept := top.Manifests[:0]
	for _, m := range top.Manifests {
		if m.Annotations[refAnnotation] != tag {
			kept = append(kept, m)
		}
	}
	top.Manifests = append(kept, d)
	sort.Slice(top.Manifests, func(i, j int) bool {
		return top.Manifests[i].Annotations[refAnnotation] < top.Manifests[j].Annotations[refAnnotation]
	})
	out, err := json.Marshal(top)
	if err != nil {
		return descriptor{}, err
	}
	return d, os.WriteFile(filepath.Join(layout, layoutIndexFile), out, 0o644)
}

func blobPath(layout, digest string) string {
	return filepath.Join(layout, layoutBlobFolder, strings.TrimPrefix(digest, "sha256:"))
}

func readJSON[T any](path string) (T, error) {
	var v T
	data, err := os.ReadFile(path)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
