// Package imagetest holds `make image-test`: the image run under runc as the
// chart's DaemonSet runs it (image_test.go, built with -tags imagetest).
package imagetest
