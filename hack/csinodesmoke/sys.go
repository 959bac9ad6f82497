package main

import (
	"os/exec"
	"syscall"
)

// size is the size of the filesystem at path.
func size(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Blocks * uint64(st.Bsize), nil
}

// runShell runs command with sh.
func runShell(command string) ([]byte, error) {
	return exec.Command("sh", "-c", command).CombinedOutput()
}
