package demo

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
)

// peakRSS returns the process's peak resident set size in bytes and where the number came
// from: VmHWM in /proc/self/status on Linux; elsewhere (or if that cannot be read) the
// memory the Go runtime obtained from the operating system, an upper bound of the Go heap,
// stacks and runtime structures that leaves out memory not managed by Go.
func peakRSS() (int64, string) {
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		if n, ok := parseVmHWM(data); ok {
			return n, "VmHWM"
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.Sys), "go runtime Sys"
}

// parseVmHWM reads the VmHWM line ("VmHWM:   123456 kB") of a /proc/<pid>/status file.
func parseVmHWM(status []byte) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 {
			return 0, false
		}
		return kb * 1024, true
	}
	return 0, false
}
