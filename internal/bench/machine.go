package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where the figures were measured.
type Machine struct {
	// CPUs is the number of logical CPUs; GOMAXPROCS the Go scheduler's.
	CPUs, GOMAXPROCS int
	// CPUModel is the first "model name" of /proc/cpuinfo; empty elsewhere.
	CPUModel string
	// MemoryBytes is MemTotal from /proc/meminfo; zero elsewhere.
	MemoryBytes int64
	// GoVersion, OS and Arch describe the toolchain and platform.
	GoVersion, OS, Arch string
}

// DescribeMachine reads the machine description from the runtime and, on
// Linux, /proc.
func DescribeMachine() Machine {
	m := Machine{
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
	}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if kb, err := strconv.ParseInt(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB"), 10, 64); err == nil {
		m.MemoryBytes = kb << 10
	}
	return m
}

// String is a one-line description.
func (m Machine) String() string {
	model := m.CPUModel
	if model == "" {
		model = "unknown CPU"
	}
	mem := "unknown memory"
	if m.MemoryBytes > 0 {
		mem = fmt.Sprintf("%.1f GiB RAM", float64(m.MemoryBytes)/(1<<30))
	}
	return fmt.Sprintf("%d CPUs (GOMAXPROCS %d), %s, %s, %s %s/%s", m.CPUs, m.GOMAXPROCS, model, mem, m.GoVersion, m.OS, m.Arch)
}

// procField returns the value of the first "name : value" line of a /proc
// file, or "" when the file or the line is missing.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
