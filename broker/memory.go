package broker

import "golang.org/x/sys/unix"

// physicalMemory is the machine's RAM in bytes (RocketMQ's TOTAL_PHYSICAL_MEMORY_SIZE), or 0 when
// the kernel does not say; 0 makes every pull behind the commitlog end count as slow, which only
// matters with slaveReadEnable.
func physicalMemory() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
