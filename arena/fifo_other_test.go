//go:build !unix

package arena

import "errors"

func mkfifo(string) error { return errors.ErrUnsupported }
