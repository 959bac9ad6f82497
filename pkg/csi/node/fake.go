package node

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"k8s.io/mount-utils"
	"k8s.io/utils/exec"
	testingexec "k8s.io/utils/exec/testing"
)

// FakeExec stands in for the commands mount-utils runs to format a disk and grow
// its filesystem (blkid, mkfs.*, fsck, resize2fs, xfs_growfs), for tests without
// real disks: a device is unformatted until mkfs formats it. Any other command
// fails.
type FakeExec struct {
	mu sync.Mutex
	// Formatted maps each device formatted by mkfs to its filesystem.
	Formatted map[string]string
	// Resized lists the devices (ext*) and mount paths (xfs) whose filesystem grew.
	Resized []string
}

var _ exec.Interface = &FakeExec{}

// NewFakeMounter returns a SafeFormatAndMount over mount-utils' FakeMounter and a
// FakeExec, and both fakes.
func NewFakeMounter() (*mount.SafeFormatAndMount, *mount.FakeMounter, *FakeExec) {
	m := mount.NewFakeMounter(nil)
	e := &FakeExec{Formatted: map[string]string{}}
	return mount.NewSafeFormatAndMount(m, e), m, e
}

func (f *FakeExec) Command(cmd string, args ...string) exec.Cmd {
	action := func() ([]byte, []byte, error) { return f.run(cmd, args) }
	return testingexec.InitFakeCmd(&testingexec.FakeCmd{
		CombinedOutputScript: []testingexec.FakeAction{action},
		OutputScript:         []testingexec.FakeAction{action},
		RunScript:            []testingexec.FakeAction{action},
	}, cmd, args...)
}

func (f *FakeExec) CommandContext(_ context.Context, cmd string, args ...string) exec.Cmd {
	return f.Command(cmd, args...)
}

func (f *FakeExec) LookPath(file string) (string, error) { return "/usr/sbin/" + file, nil }

func (f *FakeExec) run(cmd string, args []string) ([]byte, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(args) == 0 {
		return nil, nil, fmt.Errorf("%s: no arguments", cmd)
	}
	dev := args[len(args)-1]
	switch cmd {
	case "blkid":
		fs, ok := f.Formatted[dev]
		if !ok {
			// blkid's exit status when it finds no filesystem.
			return nil, nil, testingexec.FakeExitError{Status: 2}
		}
		return []byte("DEVNAME=" + dev + "\nTYPE=" + fs + "\n"), nil, nil
	case "fsck":
		return nil, nil, nil
	case "resize2fs", "xfs_growfs":
		f.Resized = append(f.Resized, dev)
		return nil, nil, nil
	case "mkfs.ext4", "mkfs.ext3", "mkfs.xfs":
		if slices.Contains(args, dev) {
			f.Formatted[dev] = cmd[len("mkfs."):]
		}
		return nil, nil, nil
	}
	return nil, nil, fmt.Errorf("%s: not faked", cmd)
}
