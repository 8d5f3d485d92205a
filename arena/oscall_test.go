package arena

import "runtime"

// mapCall is the system call that errors from mapping anonymous memory name.
var mapCall = map[bool]string{true: "VirtualAlloc", false: "mmap"}[runtime.GOOS == "windows"]
