package kernelrt

// The backends register themselves with internal/kern when linked in.
import (
	_ "github.com/kernelrt/kernelrt/internal/generic"
)
