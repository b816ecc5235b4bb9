package lambdalocal

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// children returns the processes whose parent is pid, from /proc.
func children(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var kids []int
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue // the process ended meanwhile
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(raw)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		if kid, err := strconv.Atoi(filepath.Base(filepath.Dir(path))); err == nil {
			kids = append(kids, kid)
		}
	}
	return kids
}
