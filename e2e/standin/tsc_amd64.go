package standin

// rdtsc reads this host's time stamp counter (tsc_amd64.s).
func rdtsc() uint64
