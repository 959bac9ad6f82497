package childproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExitErrorCarriesLogTail(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "child.log")
	if err := os.WriteFile(logPath, []byte("from an earlier start\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Start("child", logPath, []string{"CHILDPROC_WORD=bye"}, "sh", "-c", `echo "$CHILDPROC_WORD"; exit 3`)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		t.Fatal("child did not exit")
	}
	msg := p.ExitError().Error()
	for _, want := range []string{"child exited: exit status 3", "from an earlier start", "+ sh -c", "bye"} {
		if !strings.Contains(msg, want) {
			t.Errorf("ExitError() = %q, want it to contain %q", msg, want)
		}
	}
}

func TestStopEndsTheProcess(t *testing.T) {
	p, err := Start("sleeper", filepath.Join(t.TempDir(), "sleeper.log"), nil, "sleep", "600")
	if err != nil {
		t.Fatal(err)
	}
	p.Stop()
	select {
	case <-p.Done():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	p.Stop() // a second Stop is a no-op
}

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\n", 5, "a\nb"},
		{"a\nb\nc", 0, "a\nb\nc"},
	} {
		if got := Tail(tc.s, tc.n); got != tc.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestFirstExit(t *testing.T) {
	dir := t.TempDir()
	running, err := Start("sleeper", dir+"/sleeper.log", nil, "sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	defer running.Stop()
	if err := FirstExit([]*Process{running}); err != nil {
		t.Fatalf("FirstExit while all run = %v, want nil", err)
	}
	failed, err := Start("failer", dir+"/failer.log", nil, "sh", "-c", "echo broken; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	<-failed.Done()
	if err := FirstExit([]*Process{running, failed}); err == nil {
		t.Fatal("FirstExit after one exited = nil, want its exit error")
	}
}

func TestLogTails(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/a.log", []byte("1\n2\n3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := LogTails(dir, 2, "a", "missing")
	want := "===== a (" + dir + "/a.log) =====\n" + Tail("1\n2\n3\n", 2) + "\n"
	if got != want {
		t.Errorf("LogTails = %q, want %q", got, want)
	}
}
