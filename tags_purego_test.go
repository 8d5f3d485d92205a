//go:build purego || !amd64

package kernelrt

var wantBackends = []string{"generic"}
