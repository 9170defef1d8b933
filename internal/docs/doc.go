// Package docs holds the checks on the repository's own documentation; it
// has no code of its own. Its test fails on a link in a tracked markdown
// file that leaves the repository: documentation is read where the
// repository is (an air-gapped cluster, a release tarball), so it refers to
// its own files and names outside material in plain text.
package docs // import "github.com/otelcol-ai/otelcol-ai/internal/docs"
