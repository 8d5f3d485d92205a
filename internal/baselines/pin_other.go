//go:build !linux

package baselines

import "errors"

// pinThread cannot pin outside Linux.
func pinThread(cpu int) error { return errors.New("baselines: thread pinning needs Linux") }
