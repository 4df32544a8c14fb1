package lab

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// ThisMachine describes the machine and the build of bin: its commit
// from the build's VCS stamp (read from this process when bin is its own
// executable, else by go version -m), else version (-ldflags -X
// main.version=…) unless that is "dev".
func ThisMachine(bin, version string) Machine {
	m := Machine{Cores: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, GoVersion: runtime.Version(), Commit: "unknown"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if m.CPU == "" {
		m.CPU = "unknown"
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				m.MemoryGiB = kb / (1 << 20)
			}
		}
	}
	var settings []debug.BuildSetting
	if self, err := os.Executable(); err == nil && self == bin {
		if bi, ok := debug.ReadBuildInfo(); ok {
			settings = bi.Settings
		}
	} else if out, err := exec.Command("go", "version", "-m", bin).Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Fields(l)
			if len(f) >= 2 && f[0] == "build" {
				k, v, _ := strings.Cut(f[1], "=")
				settings = append(settings, debug.BuildSetting{Key: k, Value: v})
			}
		}
	}
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			m.Commit = s.Value
		case "vcs.modified":
			m.Modified = s.Value == "true"
		}
	}
	if m.Commit == "unknown" && version != "" && version != "dev" {
		m.Commit = version
	} else if m.Commit == "unknown" {
		m.Commit = "unknown (a build without a VCS stamp: -buildvcs=false and no -ldflags -X main.version=…)"
	}
	return m
}

// LoadAverage is /proc/loadavg's 1, 5 and 15 minute figures (zeros where
// there is none).
func LoadAverage() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	for i, f := range strings.Fields(string(b)) {
		if i >= 3 {
			break
		}
		out[i], _ = strconv.ParseFloat(f, 64)
	}
	return out
}
