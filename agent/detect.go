package agent

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// detectVCPUs counts the host's logical CPUs.
func detectVCPUs() int64 { return int64(runtime.NumCPU()) }

// detectMemoryMB reads MemTotal from /proc/meminfo.
func detectMemoryMB() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("detect memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("detect memory: MemTotal %q: %w", fields[1], err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("detect memory: no MemTotal in /proc/meminfo")
}

// detectDiskGB is the size of the filesystem holding dir.
func detectDiskGB(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("detect disk of %s: %w", dir, err)
	}
	return int64(st.Blocks) * int64(st.Bsize) / (1 << 30), nil
}
