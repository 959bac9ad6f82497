//go:build !linux

package childproc

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
