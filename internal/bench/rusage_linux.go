package bench

import (
	"os"
	"syscall"
)

// childPeakRSSKB is an exited child's peak resident set in KB, as
// /usr/bin/time -v reports it; 0 when unknown.
func childPeakRSSKB(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return 0
}
