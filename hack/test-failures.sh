#!/usr/bin/env bash
# Prints the failure messages in the output of `go test -v` (LOG), each with the
# lines indented under it, so that they end a long run's output where CI shows it
# rather than scroll away an hour before. Gomega's messages start on the line after
# "file_test.go:N:"; a t.Log line has its text on that line and is left out.
set -euo pipefail
log=$1
echo "===== failure messages in $log ====="
awk '
	/^ +[A-Za-z0-9_]+_test\.go:[0-9]+: *$/ { inblock = 1; n = 0; print; next }
	inblock && /^        / && n < 25 { print; n++; next }
	{ inblock = 0 }
' "$log"
