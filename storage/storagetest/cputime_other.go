//go:build !unix

package storagetest

import "time"

// cpuTime is 0 where the process CPU time is not read.
func cpuTime() time.Duration { return 0 }
