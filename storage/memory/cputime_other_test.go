//go:build !unix

package memory_test

import "time"

// cpuTime is not measured here: BenchmarkWriters reports 0 cpu-ns/op.
func cpuTime() time.Duration { return 0 }
