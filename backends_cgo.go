//go:build cgo && amd64 && !purego

package kernelrt

import _ "github.com/kernelrt/kernelrt/internal/ckernels"
