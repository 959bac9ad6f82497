package standin

import (
	"os"
	"testing"
)

func TestTSCArgs(t *testing.T) {
	if got := tscArgs(2445406); got != "tsc=reliable tsc_early_khz=2445406" {
		t.Errorf("tscArgs(2445406) = %q", got)
	}
	// Without a frequency the TSC is not trusted.
	if got := tscArgs(0); got != "" {
		t.Errorf("tscArgs(0) = %q, want none", got)
	}
	for cpuinfo, want := range map[string]bool{
		"processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc rdtscp\n": true,
		"processor\t: 0\nflags\t\t: fpu tsc constant_tsc rdtscp\n":             false,
		"processor\t: 0\nflags\t\t: fpu tsc\n":                                 false,
		"processor\t: 0\n":                                                     false,
	} {
		if got := hasConstantTSC(cpuinfo); got != want {
			t.Errorf("hasConstantTSC(%q) = %v, want %v", cpuinfo, got, want)
		}
	}
}

// The measurement is what every guest's clock runs on: two of them must agree
// within 0.5% (a wrong frequency makes guest clocks drift by as much). A host whose
// TSC is not constant gives its guests no TSC arguments.
func TestMeasureTSC(t *testing.T) {
	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil || !hasConstantTSC(string(cpuinfo)) || rdtsc() == 0 {
		if args := tscKernelArgs(); args != "" {
			t.Fatalf("a host without a constant TSC gave its guests %q", args)
		}
		return
	}
	a, b := measureTSCkHz(), measureTSCkHz()
	t.Logf("TSC: %d and %d kHz; guests get %q", a, b, tscKernelArgs())
	if a < 100_000 || a > 10_000_000 {
		t.Fatalf("measured %d kHz, not a CPU's TSC", a)
	}
	if d := max(a, b) - min(a, b); d*200 > a {
		t.Errorf("two measurements differ by more than 0.5%%: %d and %d kHz", a, b)
	}
}
