package fdlimit

import "syscall"

var osLimits = limits{
	get: func() (uint64, uint64, error) {
		var l syscall.Rlimit
		err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
		return l.Cur, l.Max, err
	},
	set: func(soft, hard uint64) error {
		return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: soft, Max: hard})
	},
}
