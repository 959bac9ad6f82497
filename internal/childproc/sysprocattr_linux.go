package childproc

import "syscall"

// sysProcAttr makes the kernel kill the child if the test binary dies without running
// Stop (a test timeout panics past TestMain's cleanup), so no process outlives it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
