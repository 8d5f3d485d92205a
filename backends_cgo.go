//go:build cgo && amd64

package kernelrt

import _ "github.com/kernelrt/kernelrt/internal/ckernels"
