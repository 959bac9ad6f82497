package standin

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Under TCG a guest's TSC is the host's own, read by qemu at each RDTSC, so it runs
// at the host's rate. The guest kernel does not trust it there: it finds it unstable
// and keeps time with the emulated HPET, whose every read leaves the guest (a Go
// time.Now() took 3 µs instead of 0.18, docs/node-image.md). Trusting the TSC
// (tsc=reliable) is only safe with its frequency given: a guest starved at boot
// calibrated it 16 times too low and its clocks ran 16 times fast. The stand-in knows
// the frequency, since it is the host's, and passes it (tsc_early_khz). KubeVirt does
// no such thing under emulation; it is the stand-in's, like its accelerator.

// tscKernelArgs are the guest kernel arguments that let a TCG guest keep time with the
// TSC, or "" when this host's TSC rate cannot be trusted to be constant.
var tscKernelArgs = sync.OnceValue(func() string {
	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil || !hasConstantTSC(string(cpuinfo)) {
		return ""
	}
	return tscArgs(measureTSCkHz())
})

func tscArgs(khz uint64) string {
	if khz == 0 {
		return ""
	}
	return fmt.Sprintf("tsc=reliable tsc_early_khz=%d", khz)
}

// hasConstantTSC: the TSC ticks at one rate whatever the CPU's frequency and sleep
// state, so one measurement holds for the VMs' lifetime.
func hasConstantTSC(cpuinfo string) bool {
	for line := range strings.Lines(cpuinfo) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			f := strings.Fields(v)
			return slices.Contains(f, "constant_tsc") && slices.Contains(f, "nonstop_tsc")
		}
	}
	return false
}

// measureTSCkHz counts TSC ticks against the monotonic clock: the median of five
// 100 ms samples, so one sample stretched by a preemption between the two reads does
// not count.
func measureTSCkHz() uint64 {
	var samples []uint64
	for range 5 {
		t0, c0 := time.Now(), rdtsc()
		time.Sleep(100 * time.Millisecond)
		c1, t1 := rdtsc(), time.Now()
		if c1 <= c0 {
			return 0
		}
		samples = append(samples, (c1-c0)*uint64(time.Millisecond)/uint64(t1.Sub(t0)))
	}
	slices.Sort(samples)
	return samples[len(samples)/2]
}
