package main

import "testing"

func TestSummaryLine(t *testing.T) {
	if got, want := summary(812, 0, 3), "parity: 812 passed, 0 failed, 3 skipped"; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
}
