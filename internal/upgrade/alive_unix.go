//go:build unix

package upgrade

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Running reports whether p, recorded on this host, is still running: its
// pid exists and, where /proc tells (Linux), the process with that pid did
// not start after p did (the pid was not reused). A record of another
// host is not running here.
func (p Process) Running() bool {
	if p.Host != self.Host || p.PID <= 0 {
		return false
	}
	if err := syscall.Kill(p.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if start, ok := procStart(p.PID); ok && start.After(p.Started.Add(2*time.Second)) {
		return false
	}
	return true
}

// procStart returns when process pid started, from /proc: its start in
// clock ticks after boot (field 22 of /proc/PID/stat, at 100 ticks a
// second, the value of every Linux kernel's USER_HZ) and the boot time of
// /proc/stat.
func procStart(pid int) (time.Time, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return time.Time{}, false
	}
	// The command (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return time.Time{}, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return time.Time{}, false
	}
	ticks, err := strconv.ParseInt(fields[19], 10, 64) // field 22: 3 to 22 after the command
	if err != nil {
		return time.Time{}, false
	}
	sys, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(sys), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			boot, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.Unix(boot, 0).Add(time.Duration(ticks) * 10 * time.Millisecond), true
		}
	}
	return time.Time{}, false
}
