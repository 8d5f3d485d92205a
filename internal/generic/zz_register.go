package generic

import "github.com/kernelrt/kernelrt/internal/kern"

// Files' init functions run in file-name order; this one sorts last, so every field is set.
func init() { kern.Register(set) }
